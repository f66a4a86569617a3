"""The command-line parser of the harness and its subcommands: argparse, with a bad flag reported as bad input."""

from __future__ import annotations

import argparse

from harness.records import ConfigError


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as a ConfigError: one line, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{message} (see --help)")
