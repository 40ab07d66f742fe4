"""Serving a daemon's WSGI app with waitress: bind, announce readiness, stop cleanly on SIGTERM/SIGINT.

Readiness is announced three ways once the socket is bound: a log line with the URL, the optional ready file
(JSON {url, pid}, written atomically; tests and scripts wait on it, which is how port 0 works), and
sd_notify READY=1 when systemd gave us NOTIFY_SOCKET (Type=notify).
"""

import gc
import json
import logging
import os
import signal
import socket
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

import click
from waitress.server import BaseWSGIServer, MultiSocketServer, create_server

from common.config import ServerSettings
from common.disk.state_dir import share_gid
from common.disk.whole_files import replace_whole
from common.protocol.http_guard import is_loopback_address, read_token_file
from common.serving.connection_guard import SWEEP_SECONDS, ConnectionPolicy, allowed_uids, metrics_uids
from common.serving.connection_guard import install as install_connection_guard
from common.serving.request_threads import HotThreadDispatcher
from common.waiting import Doorbell

log = logging.getLogger(__name__)


class UnsafeBind(click.ClickException):
    """Refusal to listen beyond loopback without a bearer token (click prints it, exit 1)."""


def sd_notify(message: str) -> bool:
    """Send one datagram to systemd's NOTIFY_SOCKET; False when not under systemd (the protocol is that small)."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(message.encode(), address)
        return True
    except OSError as exc:
        log.warning("sd_notify(%s) failed: %s", message, exc)
        return False


def check_bind_is_safe(settings: ServerSettings) -> None:
    if not is_loopback_address(settings.host) and settings.token_file is None:
        raise UnsafeBind(
            f"--host {settings.host} is not a loopback address: refusing to listen without --token-file "
            "(anyone who can reach the port could run commands as this user)"
        )


def check_can_serve(settings: ServerSettings) -> None:
    """Every refusal the settings alone decide (bind address without a token, an unusable token file): run
    before the state directory is claimed or anything in it recovered, so a refused start touches nothing."""
    check_bind_is_safe(settings)
    if settings.token_file is not None:
        read_token_file(settings.token_file)
    allowed_uids(settings)
    metrics_uids(settings)
    share_gid(settings.share_group)


def write_ready_file(path: Path, url: str) -> None:
    data = json.dumps({"url": url, "pid": os.getpid()}).encode()
    replace_whole(str(path), data, str(path.with_name(path.name + ".tmp")), fsync=True)


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/mcp"


class _Stopper:
    """First SIGTERM/SIGINT: on_stop runs (in a thread started beforehand) while we still serve, so waiting
    callers get their answer; then the main loop is interrupted. A second signal leaves the loop at once.

    The handler itself only sets a flag and rings a Doorbell: a Python signal handler runs in the main thread
    between bytecodes, and one that takes a lock (logging, Thread.start, Event.set) deadlocks if the signal
    lands while the main thread holds that same lock."""

    def __init__(self, on_stop: Callable[[], None]):
        self.on_stop = on_stop
        self.stopping = False
        self.finished = threading.Event()
        self._bell = Doorbell()
        self._thread = threading.Thread(target=self._run, name="stopper", daemon=True)
        self._thread.start()

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            raise SystemExit(0)
        self.stopping = True
        self.signum: int | None = signum
        self._bell.ring()

    def stop_now(self) -> None:
        """The serving loop ended for another reason: still stop what we run."""
        self.stopping = True
        self.signum = None
        self._bell.ring()

    def _run(self) -> None:
        while not self._bell.wait(None):
            pass
        log.info("stopping (%s)", signal.Signals(self.signum).name if self.signum else "serving loop ended")
        sd_notify("STOPPING=1")
        try:
            self.on_stop()
        except Exception:
            log.exception("error while stopping")
        finally:
            self.finished.set()
            if self.signum:
                os.kill(os.getpid(), signal.SIGTERM)  # wakes the main loop's select with EINTR; the handler exits it


# Bytes a response may hold before the request thread writes it to the socket itself. Below a response's
# header (~125-250 bytes) and above it with any body: the header waits, and the header and body then leave in
# one send from the request thread. waitress 3 defaults to 1 (a send for the header, one for the body: each
# syscall hands the GIL to another thread and waits to get it back); far above every answer's size, the
# serving loop sends instead, and the answer then waits for that thread to be woken and scheduled, a hand-off
# on every call's path (docs/performance.md, "Measurements behind the code"). A body-less answer still goes out from the
# serving loop, which waitress wakes at the end of the request (common/serving/stream_channel.py keeps that wake for
# it: the bytes are left to send). waitress calls the option deprecated but
# keeps it in 3.x (setup.cfg: < 4).
SEND_BYTES = 256

# Young objects before a generation-0 collection. A tools/call allocates thousands of containers (werkzeug,
# pydantic, jsonschema), so the default 700 ran several collections a call; few of those objects form cycles.
GC_GEN0_THRESHOLD = 20_000


Server = MultiSocketServer | BaseWSGIServer  # one listening socket, or one per address of a host name


def _create_server(app: WSGIApplication, settings: ServerSettings) -> Server:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # send_bytes: see SEND_BYTES
        server = _create_waitress(app, settings)
    install_connection_guard(server, ConnectionPolicy(allowed_uids(settings), settings.body_timeout,
                                                      settings.first_request_timeout, settings.connection_limit,
                                                      metrics_uids(settings)))
    return server


def _create_waitress(app: WSGIApplication, settings: ServerSettings) -> Server:
    dispatcher = HotThreadDispatcher()  # common/serving/request_threads.py: the idle thread woken next
    dispatcher.set_thread_count(settings.threads)  # (waitress starts the threads only of a dispatcher it makes)
    return create_server(
        app,
        host=settings.host,
        port=settings.port,
        threads=settings.threads,
        connection_limit=settings.connection_limit,
        channel_timeout=settings.channel_timeout,
        # waitress answers 413 before buffering more (protocol/transport.py: the rest).
        max_request_body_size=settings.body_ceiling_bytes,
        ident="hive",
        clear_untrusted_proxy_headers=True,
        # Read ahead one request so waitress notices a hang-up during a long inline wait and offers
        # environ["waitress.client_disconnected"] (the bash engine then leaves the result as a todo).
        channel_request_lookahead=1,
        send_bytes=SEND_BYTES,
        # How often a request past --body-timeout (or a silent connection) is looked for.
        cleanup_interval=SWEEP_SECONDS,
        _dispatcher=dispatcher,
    )


def _tune_gc() -> None:
    """Fewer collections while serving (GC_GEN0_THRESHOLD), and none through the objects of start-up
    (modules, schemas, settings), which are moved out of the collector's reach. The daemons start with the
    collector off (their daemon_main), so it is turned on here. No collection first: it would walk every
    object of start-up (~60 ms before the first call could be served) to free ~2,000 (a few hundred KiB)."""
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)
    gc.enable()


class _LaterApp:
    """The WSGI app of a socket bound before the app exists (`listen`); nothing is served before `serve_daemon`
    sets the target, since waitress's loop is not running yet (connections wait in the backlog)."""

    def __init__(self) -> None:
        self.target: WSGIApplication | None = None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        assert self.target is not None, "waitress serves nothing before serve_daemon sets the app"
        return self.target(environ, start_response)


@dataclass
class Listener:
    """A bound, not yet serving, waitress server: a port that cannot be had refuses the start before the
    daemon recovers anything from its state directory."""

    server: Server
    app: _LaterApp


def listen(settings: ServerSettings) -> Listener:
    check_bind_is_safe(settings)
    app = _LaterApp()
    try:
        return Listener(_create_server(app, settings), app)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}") from None


def _bound_port(server: Server) -> int:
    """The port bound (chosen by the kernel for port 0). A host name with several addresses (`localhost` with
    both 127.0.0.1 and ::1) gets a MultiSocketServer, which has no `effective_port`: its first socket's port."""
    if isinstance(server, MultiSocketServer):
        return int(server.effective_listen[0][1])
    return int(server.effective_port)  # type: ignore[attr-defined]  # set by waitress, not in types-waitress


def serve_daemon(app: WSGIApplication, settings: ServerSettings, *, on_stop: Callable[[], None],
                 listener: Listener | None = None) -> None:
    """Serve `app` (on `listener`, bound earlier, or on a socket bound now) until SIGTERM/SIGINT; then call
    on_stop(), stop serving and return."""
    listener = listener or listen(settings)
    listener.app.target = app
    server = listener.server
    url = _url(settings.host, _bound_port(server))
    stopper = _Stopper(on_stop)
    previous = {s: signal.signal(s, stopper.handle) for s in (signal.SIGTERM, signal.SIGINT)}
    _tune_gc()
    try:
        log.info("serving MCP on %s", url)
        if settings.ready_file:
            write_ready_file(Path(settings.ready_file), url)
        sd_notify("READY=1")
        try:
            server.run()
        except SystemExit:
            pass
        if not stopper.stopping:
            stopper.stop_now()
        stopper.finished.wait()
    finally:
        server.close()
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=2)
        for s, handler in previous.items():
            signal.signal(s, handler)
