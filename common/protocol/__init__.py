"""The MCP protocol over streamable HTTP: transport, methods, sessions, progress and cancellation, tools, the client."""
