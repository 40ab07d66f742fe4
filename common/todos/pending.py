"""The pending todos of one source: the newest undelivered state per key, mirrored in the outbox journal.

The coalescing rules live here. A clear that meets its key's upsert still pending drops that upsert. The
clear itself is dropped too only when the harness is known to hold nothing for the key (this process saw a
clear of it acknowledged and sent nothing since). Otherwise an earlier upsert may have reached the harness
(in this process, in an earlier one, or one whose reply was lost), and the clear must go out: a clear of a
key the harness does not hold is acknowledged as a no-op, so being conservative costs one message, never a
stale todo.

Not thread-safe: TodoDelivery holds its lock around every call.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from common.todos.outbox import Outbox
from common.todos.wire import OP_CLEAR, OP_UPSERT, clear_message, upsert_message

log = logging.getLogger(__name__)

KNOWN_ABSENT_CAP = 4096  # keys remembered as "harness holds nothing"; forgetting one only costs a redundant clear


@dataclass
class Entry:
    """The newest pending state of one key. `maybe_held`: the harness may hold an earlier todo of this key,
    so a clear must be sent rather than simply dropping this entry."""

    key: str
    seq: int  # order of the last change; delivery goes oldest first
    message: dict[str, Any]
    maybe_held: bool

    @property
    def op(self) -> str:
        return str(self.message["op"])


class PendingTodos:
    """Pending entries by key, oldest change first, each one also a line in `outbox`."""

    def __init__(self, source: str, outbox: Outbox):
        self.source = source
        self._outbox = outbox
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._known_absent: OrderedDict[str, None] = OrderedDict()
        self._seq = self._load()

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def keys(self) -> list[str]:
        return list(self._entries)

    def get(self, key: str) -> Entry | None:
        return self._entries.get(key)

    def coalesce(self, key: str, message: dict[str, Any], in_flight: Entry | None) -> None:
        """Fold the new state of `key` into the map and the outbox. `in_flight`: the entry on the wire now."""
        current = self._entries.get(key)
        on_wire = current is not None and current is in_flight
        if message["op"] == OP_CLEAR:
            if current is None and key in self._known_absent:
                return  # the harness already holds nothing for this key
            if current is not None and current.op == OP_CLEAR:
                return  # that clear is still to come (or on the wire; a failure keeps it pending)
            if current is not None and not on_wire and not current.maybe_held:
                del self._entries[key]  # the harness never saw this key: cancel the upsert, send nothing
                self._outbox.drop(key)
                return
            maybe_held = True
        elif current is None:
            maybe_held = key not in self._known_absent
        else:
            maybe_held = current.maybe_held or on_wire
        self._seq += 1
        entry = Entry(key, self._seq, message, maybe_held)
        self._entries.pop(key, None)
        self._entries[key] = entry  # to the back: delivery follows the order of the last change
        self._outbox.save(entry.seq, key, message)

    def settle(self, entry: Entry, reached: bool, delivered: bool) -> None:
        """Record what one request of `entry` did. Only an entry that is still the key's newest state leaves the
        map: one queued while it was on the wire replaces it and goes out next."""
        key = entry.key
        if reached and entry.op == OP_UPSERT:
            entry.maybe_held = True
            self._known_absent.pop(key, None)
        if not delivered:
            return
        if self._entries.get(key) is entry:
            del self._entries[key]
            self._outbox.drop(key)
        if entry.op == OP_CLEAR:
            self._remember_absent(key)

    def _remember_absent(self, key: str) -> None:
        self._known_absent.pop(key, None)
        self._known_absent[key] = None
        while len(self._known_absent) > KNOWN_ABSENT_CAP:
            self._known_absent.popitem(last=False)

    def _load(self) -> int:
        for stored in self._outbox.load():
            try:
                message = self._checked(stored.key, stored.message)
            except ValueError as e:
                log.warning("todo outbox: the entry for %r is unusable (%s); dropped: %.300r", stored.key, e,
                            stored.message)
                self._outbox.drop(stored.key)
                continue
            # Written by an earlier run, which may have sent it already: a later clear must go out.
            self._entries[stored.key] = Entry(stored.key, stored.seq, message, maybe_held=True)
        return max((e.seq for e in self._entries.values()), default=0)

    def _checked(self, key: str, message: dict[str, Any]) -> dict[str, Any]:
        """A message read back from the outbox, rebuilt through the constructors that check every field."""
        if message.get("key") != key or message.get("source") != self.source:
            raise ValueError("key/source: do not match the entry")
        if message.get("op") == OP_UPSERT:
            return upsert_message(self.source, key, message.get("summary"), message.get("body"), message.get("data"))
        if message.get("op") == OP_CLEAR:
            return clear_message(self.source, key)
        raise ValueError(f"op: {message.get('op')!r} is not {OP_UPSERT} or {OP_CLEAR}")
