"""What both daemons share: the MCP transport, tool declarations, waits, names, todos, serving, knobs."""
