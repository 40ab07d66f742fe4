"""Who is on the other end of a TCP connection: the uid owning the client's socket, from the kernel's table.

Loopback TCP has no SO_PEERCRED, but the client's socket is on this machine and the kernel's socket table
records its owner. The client's socket is the one whose local address is our peer address and whose remote
address is our local address; that 4-tuple is unique in the network namespace. It is looked up once per
connection, right after accept, before any byte of the request is read:

- by sock_diag (netlink, SOCK_DIAG_BY_FAMILY without a dump): one exact lookup in the kernel's hash table,
  whose cost does not grow with the number of sockets on the machine;
- else (netlink refused, e.g. by a seccomp filter) in /proc/net/tcp and /proc/net/tcp6, whose owner column
  is the same field, but which the kernel renders by walking its whole hash table: a thousand times slower
  under load (docs/performance.md, "Measurements behind the code").

Rows in TIME_WAIT carry no owner (the kernel reports uid 0): such a row never names a caller. A client socket
cannot be in TIME_WAIT before we close our end, so this refuses only what cannot be known.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct
import threading
from typing import Any

TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_TIME_WAIT = b"06"
TCP_TIME_WAIT = 6

# linux/sock_diag.h, linux/inet_diag.h, linux/netlink.h
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
_NLMSGHDR = struct.Struct("=IHHII")
_REQ_V2 = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states; then the sockid
_SOCKID = struct.Struct("!HH16s16s")  # sport, dport (network order), src, dst; then if and cookie (host order)
_SOCKID_TAIL = struct.Struct("=III")
_NO_COOKIE = 0xFFFFFFFF
_MSG_UID_OFFSET = _NLMSGHDR.size + 4 + 48 + 12  # inet_diag_msg: 4 bytes, the sockid, expires, rqueue, wqueue


class PeerUnknown(Exception):
    """The client's socket is not in this machine's tables (a remote client, or one that is gone)."""


def _hex_v4(address: str) -> str:
    return f"{int.from_bytes(socket.inet_aton(address), 'little'):08X}"


def _hex_v6(address: str) -> str:
    packed = socket.inet_pton(socket.AF_INET6, address)
    return "".join(f"{int.from_bytes(packed[i:i + 4], 'little'):08X}" for i in range(0, 16, 4))


def _spellings(address: str) -> list[tuple[str, str]]:
    """(table, kernel spelling) of an address: an IPv4 client socket is in tcp, an IPv6 one (IPv4-mapped
    included, for a dual-stack client reaching an IPv4 address) in tcp6."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if ip.version == 4:
        return [(TCP_TABLES[0], _hex_v4(str(ip))), (TCP_TABLES[1], _hex_v6(f"::ffff:{ip}"))]
    if ip.ipv4_mapped is not None:
        return [(TCP_TABLES[0], _hex_v4(str(ip.ipv4_mapped))), (TCP_TABLES[1], _hex_v6(str(ip)))]
    return [(TCP_TABLES[1], _hex_v6(str(ip)))]


def peer_uid(local: tuple[Any, ...], peer: tuple[Any, ...]) -> int:
    """The uid owning the client socket of the connection (`local` is our end, as getsockname() gives it,
    `peer` the client's, as getpeername()); PeerUnknown when no live socket of this machine is it."""
    try:
        return peer_uid_netlink(local, peer)
    except PermissionError:
        return peer_uid_proc(local, peer)
    except OSError as exc:
        if exc.errno in (errno.EPROTONOSUPPORT, errno.EAFNOSUPPORT, errno.EOPNOTSUPP):
            return peer_uid_proc(local, peer)
        raise


def _packed(address: str) -> tuple[int, bytes]:
    """(family, the 16 bytes a sockid holds) of an address (inet_pton: the ipaddress module is far slower)."""
    if ":" in address:
        return socket.AF_INET6, socket.inet_pton(socket.AF_INET6, address.split("%", 1)[0])
    return socket.AF_INET, socket.inet_aton(address) + bytes(12)


def _mapped(packed_v4: bytes) -> bytes:
    return bytes(10) + b"\xff\xff" + packed_v4[:4]


_local = threading.local()


def _netlink() -> socket.socket:
    """This thread's sock_diag socket (waitress looks callers up in its one serving thread): kept open,
    because opening one cost more than the lookup itself."""
    nl = getattr(_local, "socket", None)
    if nl is None:
        nl = _local.socket = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC,
                                           NETLINK_SOCK_DIAG)
    return nl


def peer_uid_netlink(local: tuple[Any, ...], peer: tuple[Any, ...]) -> int:
    family, client = _packed(peer[0])
    _, server = _packed(local[0])
    nl = _netlink()
    uid = _diag_lookup(nl, family, client, peer[1], server, local[1])
    if uid is None and family == socket.AF_INET:  # a dual-stack client reaching an IPv4 address: an IPv6 socket
        uid = _diag_lookup(nl, socket.AF_INET6, _mapped(client), peer[1], _mapped(server), local[1])
    if uid is None:
        raise PeerUnknown(f"no socket {peer[0]}:{peer[1]} -> {local[0]}:{local[1]} on this machine")
    return uid


def _diag_lookup(nl: socket.socket, family: int, src: bytes, sport: int, dst: bytes, dport: int) -> int | None:
    """The owner of the TCP socket whose local end is src:sport and remote end dst:dport; None if none."""
    body = (_REQ_V2.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + _SOCKID.pack(sport, dport, src, dst)
            + _SOCKID_TAIL.pack(0, _NO_COOKIE, _NO_COOKIE))
    nl.send(_NLMSGHDR.pack(_NLMSGHDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + body)
    reply = nl.recv(8192)
    _, kind, _, _, _ = _NLMSGHDR.unpack_from(reply)
    if kind == NLMSG_ERROR:
        code = -struct.unpack_from("=i", reply, _NLMSGHDR.size)[0]
        if code in (errno.ENOENT, 0):
            return None
        raise OSError(code, os.strerror(code))
    if kind != SOCK_DIAG_BY_FAMILY or len(reply) < _MSG_UID_OFFSET + 4:
        raise OSError(errno.EPROTO, "unexpected sock_diag reply")
    if reply[_NLMSGHDR.size + 1] == TCP_TIME_WAIT:
        return None
    uid: int = struct.unpack_from("=I", reply, _MSG_UID_OFFSET)[0]
    return uid


def peer_uid_proc(local: tuple[Any, ...], peer: tuple[Any, ...]) -> int:
    """The same answer from /proc/net/tcp{,6} (slow: see the module's docstring)."""
    ours = dict(_spellings(local[0]))
    for table, client in _spellings(peer[0]):
        server = ours.get(table)
        if server is None:
            continue
        needle = f" {client}:{peer[1]:04X} {server}:{local[1]:04X} ".encode()
        uid = _find_row(table, needle)
        if uid is not None:
            return uid
    raise PeerUnknown(f"no socket {peer[0]}:{peer[1]} -> {local[0]}:{local[1]} in {', '.join(TCP_TABLES)}")


def _find_row(table: str, needle: bytes) -> int | None:
    try:
        with open(table, "rb") as f:
            data = f.read()  # to the end: procfs hands the table out a page or so per read(2)
    except FileNotFoundError:  # no IPv6 in this kernel
        return None
    at = data.find(needle)
    if at < 0:
        return None
    # Row: sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ...; the needle starts at `local`.
    fields = data[at: data.find(b"\n", at)].split()
    if fields[2] == _TIME_WAIT:
        return None
    return int(fields[6])
