"""`eval_agent.py tools`: a live MCP server's tools, printed in the task file's `tools` format."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from harness.config import MCP_HEADERS
from harness.endpoints import header_line, http_url
from harness.flags import Parser
from harness.records import ConfigError
from harness.reporters.console import say
from harness.settings import Sources, number
from harness.subcommands.mcp_client import HttpSession, StdioSession, fetch_tools

MCP_TIMEOUT = 10.0


def add_mcp_flags(parser: argparse.ArgumentParser) -> None:
    """--mcp-command or --mcp-url, --mcp-header and --mcp-timeout: where the live surface is, and how to ask it."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--mcp-command", metavar="COMMAND", help="an MCP server to start, speaking stdio (split like a shell)"
    )
    source.add_argument("--mcp-url", metavar="URL", help="an MCP server's Streamable HTTP endpoint")
    parser.add_argument(
        "--mcp-header",
        metavar="'NAME: VALUE'",
        action="append",
        default=[],
        help=f"a header for every request to --mcp-url, as curl takes it; repeatable ({MCP_HEADERS.var}: JSON)",
    )
    parser.add_argument(
        "--mcp-timeout",
        metavar="SECONDS",
        default=str(MCP_TIMEOUT),
        help=f"the longest wait for one reply (default {MCP_TIMEOUT:g})",
    )


def mcp_session(args: argparse.Namespace) -> Callable[[], Any] | None:
    """What starts a session with the MCP server the flags name, every flag checked first; None when they name none."""
    timeout = number(float, 0.001, 3600.0)(args.mcp_timeout, "--mcp-timeout")
    if args.mcp_command:
        try:
            argv = shlex.split(args.mcp_command)
        except ValueError as exc:
            raise ConfigError(f"--mcp-command: cannot split the command: {exc}") from None  # it may hold a secret
        if not argv:
            raise ConfigError("--mcp-command: empty command")
        return lambda: StdioSession(argv, timeout)
    if not args.mcp_url:
        return None
    url = http_url(args.mcp_url, "--mcp-url")
    fields = {**Sources(args, os.environ).get(MCP_HEADERS)}
    fields |= dict(header_line(line, "--mcp-header") for line in args.mcp_header)
    return lambda: HttpSession(url, timeout, fields)


def main(argv: Sequence[str]) -> int:
    """Print a live MCP server's tools in the task file's `tools` format."""
    parser = Parser(
        prog="eval_agent.py tools",
        description="Print the tools of a live MCP server in the task file's `tools` format.",
        epilog="Exit codes: 0 printed, 2 bad flags, 3 the MCP server could not be reached or misbehaved.",
    )
    add_mcp_flags(parser)
    session = mcp_session(parser.parse_args(argv))
    if session is None:
        raise ConfigError("give --mcp-command or --mcp-url (see --help)")
    for line in json.dumps(fetch_tools(session()), indent=2, ensure_ascii=False).splitlines():
        say(line)
    return 0
