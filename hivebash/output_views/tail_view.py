"""The end of output files, or only what is new since the agent was last shown them (new_only)."""

from __future__ import annotations

import os

from common.terminal_text import readable

from .reading import LINE_CAP, VIEW_BUDGET, Source, View, open_output

def _tail_bytes(fd: int, start: int, size: int, share: int) -> tuple[bytes, int]:
    """The last bytes of [start, size) whose readable text fits in `share` bytes, and where they begin."""
    first = max(start, size - share)
    raw = os.pread(fd, size - first, first)
    while True:
        if first > start:  # cut inside a character: skip its continuation bytes
            skip = 0
            while skip < min(3, len(raw)) and raw[skip] & 0xC0 == 0x80:
                skip += 1
            raw, first = raw[skip:], first + skip
            nl = raw.find(b"\n", 0, LINE_CAP)  # and the rest of a line cut at its start
            if 0 <= nl < len(raw) - 1:
                raw, first = raw[nl + 1:], first + nl + 1
        text = readable(raw)
        grown = len(text.encode())
        if grown <= share:
            return text, first
        cut = len(raw) - len(raw) * share // grown + 1  # escapes made it longer than the bytes it shows
        raw, first = raw[cut:], first + cut


def tail(sources: list[Source], starts: dict[str, int] | None = None, budget: int = VIEW_BUDGET,
         cap: int | None = None) -> View:
    """The end of each source, cleaned, within `budget` bytes in all; with `starts`, only what lies after
    `starts[stream]` (what the reader has not been shown: new_only). Empty streams leave their share to
    the others. `cap`: at most that many bytes of any one stream (the daemon's --tail-bytes)."""
    sizes = {}
    for src in sources:
        try:
            sizes[src.stream] = os.stat(src.path, follow_symlinks=False).st_size
        except FileNotFoundError:
            sizes[src.stream] = 0
    begin = {s.stream: min((starts or {}).get(s.stream, 0), sizes[s.stream]) for s in sources}
    shares, left = {}, budget - 160 * len(sources)
    by_need = sorted(sources, key=lambda s: sizes[s.stream] - begin[s.stream])
    for i, src in enumerate(by_need):  # a short stream leaves the rest of its share to the longer one
        # (text: an escaped byte takes up to 4 bytes of it)
        shares[src.stream] = min(4 * (sizes[src.stream] - begin[src.stream]), left // (len(by_need) - i),
                                 cap if cap is not None else budget)
        left -= shares[src.stream]
    parts, data, read_to = [], {}, {}
    for src in sources:
        size, start = sizes[src.stream], begin[src.stream]
        text, first = "", size
        fd = open_output(src.path) if size > start else None
        if fd is not None:
            try:
                text, first = _tail_bytes(fd, start, size, shares[src.stream])
            finally:
                os.close(fd)
        read_to[src.stream] = size
        new = f"new since byte {start}: " if starts is not None else ""
        if not text:
            head = (f"--- {src.stream}: nothing new ({size} bytes, {src.path}) ---" if starts is not None
                    else f"--- {src.stream}: empty ---")
        elif first > start:
            head = (f"--- {src.stream}: {new}last {size - first} of {size - start} bytes ({first - start} elided: "
                    f"grep or from_line read them; file {src.path}) ---")
        else:
            head = f"--- {src.stream}: {new}{size - start} bytes ({src.path}) ---"
        body = text if not text or text.endswith("\n") else text + "\n(no newline at end)\n"
        parts.append(head + "\n" + body)
        data[src.stream] = {"path": src.path, "size": size, "from_byte": start, "text": text,
                            "elided_bytes": max(0, first - start)}
    return View("".join(parts), {"streams": data}, read_to)
