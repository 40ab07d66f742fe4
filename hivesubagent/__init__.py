"""hive-subagent-daemon: nested headless claude sessions as MCP tools (start, continue, interrupt, status)."""
