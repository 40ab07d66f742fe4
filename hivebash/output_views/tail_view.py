"""The end of output files, or only what is new since the agent was last shown them (new_only)."""

from __future__ import annotations

import os

from common.terminal_text import readable

from .reading import LINE_CAP, VIEW_BUDGET, Source, View, open_output


def _tail_bytes(fd: int, start: int, size: int, share: int) -> tuple[str, int]:
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


def _begins(sources: list[Source], sizes: dict[str, int],
            starts: dict[str, int] | None) -> tuple[dict[str, int], set[str]]:
    """Where each stream's view begins, and which streams are now smaller than the reader's cursor: those were
    truncated (by the task or the agent) since, so what they hold now was never shown and starts at byte 0."""
    begin, truncated = {}, set()
    for src in sources:
        start = (starts or {}).get(src.stream, 0)
        if start > sizes[src.stream]:
            start = 0
            truncated.add(src.stream)
        begin[src.stream] = start
    return begin, truncated


def _head(src: Source, size: int, start: int, first: int, shown: bool, new_only: bool, was: int | None) -> str:
    """A stream's header line; `was`: the cursor of a file truncated below it since (its text starts at 0)."""
    cut = f"truncated (was {was} bytes when last shown, now {size}); " if was is not None else ""
    new = (cut + "new from byte 0: " if cut else f"new since byte {start}: ") if new_only else ""
    if not shown:
        return f"--- {src.stream}: {cut}nothing new ({size} bytes, {src.path}) ---" if new_only else \
            f"--- {src.stream}: empty ---"
    if first > start:
        return (f"--- {src.stream}: {new}last {size - first} of {size - start} bytes ({first - start} elided: "
                f"grep or from_line read them; file {src.path}) ---")
    return f"--- {src.stream}: {new}{size - start} bytes ({src.path}) ---"


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
    begin, truncated = _begins(sources, sizes, starts)
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
        was = (starts or {}).get(src.stream) if src.stream in truncated else None
        head = _head(src, size, start, first, bool(text), starts is not None, was)
        body = text if not text or text.endswith("\n") else text + "\n(no newline at end)\n"
        parts.append(head + "\n" + body)
        data[src.stream] = {"path": src.path, "size": size, "from_byte": start, "text": text,
                            "elided_bytes": max(0, first - start), "truncated": src.stream in truncated}
    return View("".join(parts), {"streams": data}, read_to)
