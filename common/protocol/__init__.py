"""The MCP protocol over streamable HTTP: transport, methods, sessions, progress and cancellation, tools, the client."""

from common.protocol.sdk_package import defer_monolith

defer_monolith()  # before any module of this package imports mcp_types
