"""Shared helpers: run the real CLI in a subprocess, write task files to temp folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "eval_agent.py")
SHIPPED_TASKS = os.path.join(ROOT, "eval-tasks.json")
# The ten tasks the canonical file started with: tests pin behaviour on this copy, so the shipped file can grow.
CANONICAL_TASKS = os.path.join(ROOT, "tests", "data", "tasks", "imageman-ten.json")
DATA = os.path.join(ROOT, "tests", "data")
CLI_TIMEOUT = 60


PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


def clean_env(**overrides: str) -> dict[str, str]:
    """The current environment without any EVAL_* setting or proxy, on the ten-task file, plus overrides."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("EVAL_") and key.lower() not in PROXY_VARIABLES
    }
    env["EVAL_TASKS"] = CANONICAL_TASKS
    env.update(overrides)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[str, str, int]:
    """Run eval_agent.py without site-packages (proving it needs the stdlib only); (stdout, stderr, exit code)."""
    proc = subprocess.run(
        [sys.executable, "-S", SCRIPT, *args],
        capture_output=True,
        text=True,
        env=env if env is not None else clean_env(),
        cwd=cwd,
        timeout=CLI_TIMEOUT,
    )
    return proc.stdout, proc.stderr, proc.returncode


def canonical_task_data() -> dict[str, Any]:
    """A fresh copy of the canonical task file's content."""
    with open(CANONICAL_TASKS, encoding="utf-8") as f:
        return json.load(f)


class TempDirTestCase(unittest.TestCase):
    """A test with its own temporary working folder."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name

    def write_json(self, name: str, data: Any) -> str:
        """Write data as JSON into the temp folder; return its path."""
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
        return path

    def read_json(self, name: str) -> Any:
        """Read a JSON file from the temp folder."""
        with open(os.path.join(self.tmp, name), encoding="utf-8") as f:
            return json.load(f)
