"""The control keys `send` can press on a tty task, as the bytes a terminal (xterm, normal cursor mode) sends."""

from __future__ import annotations

KEYS: dict[str, bytes] = {
    "enter": b"\r",
    "tab": b"\t",
    "esc": b"\x1b",
    "backspace": b"\x7f",
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "right": b"\x1b[C",
    "left": b"\x1b[D",
    "home": b"\x1b[H",
    "end": b"\x1b[F",
    "delete": b"\x1b[3~",
    "pageup": b"\x1b[5~",
    "pagedown": b"\x1b[6~",
    "space": b" ",
    # ctrl-c is the terminal's INTR (SIGINT to the foreground group), ctrl-z its SUSP, ctrl-\ its QUIT, and
    # ctrl-d its EOF; the others reach the program as they are (ctrl-x leaves nano, ctrl-r searches history).
    **{f"ctrl-{chr(c)}": bytes([c - 96]) for c in range(ord("a"), ord("z") + 1)},
    "ctrl-\\": b"\x1c",
    "ctrl-]": b"\x1d",
}
MAX_KEYS = 100
LISTED = "ctrl-c, ctrl-d, ctrl-z, tab, esc, up, down, left, right, enter, backspace"  # the common ones, for refusals

