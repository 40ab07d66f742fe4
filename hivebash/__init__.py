"""hive-bash-daemon: background shell tasks as MCP tools (run/status/kill/list)."""
