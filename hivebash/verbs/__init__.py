"""One module per request: the tools' (run, status, send, kill, list), the daemon's (recovery, retention, shutdown)."""
