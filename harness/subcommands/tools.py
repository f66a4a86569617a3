"""`eval_agent.py tools`: a live MCP server's tools, printed in the task file's `tools` format."""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from typing import Any

from harness.records import ConfigError
from harness.settings import Parser
from harness.subcommands.mcp_client import HttpSession, StdioSession, fetch_tools

MCP_TIMEOUT = 10.0


def add_mcp_flags(parser: argparse.ArgumentParser) -> None:
    """--mcp-command or --mcp-url, and --mcp-timeout: where the live surface is."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--mcp-command", metavar="COMMAND", help="an MCP server to start, speaking stdio (split like a shell)"
    )
    source.add_argument("--mcp-url", metavar="URL", help="an MCP server's Streamable HTTP endpoint")
    parser.add_argument(
        "--mcp-timeout",
        metavar="SECONDS",
        type=float,
        default=MCP_TIMEOUT,
        help=f"the longest wait for one reply (default {MCP_TIMEOUT:g})",
    )


def live_tools(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The tools of the MCP server the flags name; McpError (exit 3) when it fails us."""
    if args.mcp_command:
        try:
            argv = shlex.split(args.mcp_command)
        except ValueError as exc:
            raise ConfigError(f"--mcp-command: cannot split {args.mcp_command!r}: {exc}") from None
        if not argv:
            raise ConfigError("--mcp-command: empty command")
        return fetch_tools(StdioSession(argv, args.mcp_timeout))
    return fetch_tools(HttpSession(args.mcp_url, args.mcp_timeout))


def main(argv: Sequence[str]) -> int:
    """Print a live MCP server's tools in the task file's `tools` format."""
    parser = Parser(
        prog="eval_agent.py tools",
        description="Print the tools of a live MCP server in the task file's `tools` format.",
        epilog="Exit codes: 0 printed, 2 bad flags, 3 the MCP server could not be reached or misbehaved.",
    )
    add_mcp_flags(parser)
    args = parser.parse_args(argv)
    if not (args.mcp_command or args.mcp_url):
        raise ConfigError("give --mcp-command or --mcp-url (see --help)")
    print(json.dumps(live_tools(args), indent=2, ensure_ascii=False))
    return 0
