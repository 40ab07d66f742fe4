"""The MCP protocol over streamable HTTP: transport, methods, sessions, progress and cancellation, tools, the client."""

from common.protocol.sdk_package import defer_models

defer_models()  # before any module of this package imports mcp_types
