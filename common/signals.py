"""Signal names as both daemons show them."""

from __future__ import annotations

import signal


def signal_name(signum: int) -> str:
    """`SIGINT` for 2; a number with no name (a real-time signal) is `SIG<n>`."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"
