"""The subcommands beside a run: merge, compare, validate and tools (with the MCP client)."""
