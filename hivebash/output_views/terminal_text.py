"""Output bytes made readable for a model: what a terminal would have shown, not the bytes it was sent.

Programs that think they talk to a terminal colour their output (ANSI/CSI escape sequences), set window
titles and links (OSC sequences), and redraw progress bars with carriage returns. Kept as they are, a
`cargo build` or `pip install` tail is mostly `\\x1b[...` noise and hundreds of stale progress frames. So
every text the model reads from a task's output passes through `readable`:

- escape sequences (CSI, OSC, and the two-byte ESC forms) are removed;
- a line redrawn with `\\r` keeps only its last non-empty frame (`\\r\\n` is a plain line end);
- bytes that are not UTF-8, and the control characters left, are shown as `\\xNN`, so binary output can
  neither break a terminal nor hide text.

The files on disk keep the raw bytes.
"""

from __future__ import annotations

import re

# CSI: ESC [ parameters intermediates final (ECMA-48); OSC: ESC ] ... terminated by BEL or ST (ESC \),
# or left unterminated at the end of the text; other ESC sequences: charset designations (ESC ( B) and
# the two-byte forms (ESC =, ESC M, ...). The 8-bit CSI (U+009B) is rare but seen from some tools.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)"
    r"|\x1b[P^_][^\x1b]*(?:\x1b\\|$)"
    r"|\x1b[()*+][0-9A-Za-z]"
    r"|\x1b[@-Z\\-_=>78]"
)
# C0 control characters other than tab and newline, DEL and the C1 range: shown as \xNN. A translate
# table, not a regex with a callback: binary output is all control characters, and a Python call per
# byte made a 4 KiB tail of NUL bytes cost milliseconds.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
_SHOWN_AS_HEX = {code: f"\\x{code:02x}" for code in (*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0x80, 0xa0))}


def _last_frame(line: str) -> str:
    """What a terminal shows of a line redrawn with carriage returns: its last non-empty frame (so a
    `\r\n` line end, or a frame ended by a bare `\r`, keeps the text before it)."""
    for frame in reversed(line.split("\r")):
        if frame:
            return frame
    return ""


def clean(text: str) -> str:
    """`text` without escape sequences, each line reduced to its last carriage-return frame, and the
    remaining control characters shown as `\\xNN`."""
    if "\x1b" in text or "\x9b" in text:
        text = _ESCAPES.sub("", text)
    if "\r" in text:
        text = "\n".join(_last_frame(line) if "\r" in line else line for line in text.split("\n"))
    return text.translate(_SHOWN_AS_HEX) if _CONTROL.search(text) else text


def readable(data: bytes) -> str:
    """Raw output bytes as the model should read them (see the module doc)."""
    return clean(data.decode("utf-8", errors="backslashreplace"))
