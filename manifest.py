"""What a run measured, recorded so that a results file can be trusted and compared a month later."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

from config import HARNESS_VERSION, Config
from records import Task, TaskFile
from taskfile import canonical_sha256

GIT_TIMEOUT = 5


def run_manifest(
    config: Config, task_file: TaskFile, selected: Sequence[Task], backend_settings: Mapping[str, Any], system: str | None
) -> dict[str, Any]:
    """Harness, Python, platform, git commit, backend, task file, system prompt (its hash), selection and runs."""
    import platform  # here, not at the top: only a run that writes results pays for it

    manifest: dict[str, Any] = {
        "harnessVersion": HARNESS_VERSION,
        "python": platform.python_version(),
        "platform": platform.platform(),
        **git_state(os.getcwd()),
        "backend": config.backend,
        "backendSettings": dict(backend_settings),
        "taskFile": {"path": task_file.path, "sha256": task_file.sha256, "toolsSha256": task_file.tools_sha256},
        "systemPromptSha256": hashlib.sha256(system.encode("utf-8")).hexdigest() if system is not None else None,
        "selection": {
            "task": list(config.task_globs),
            "category": list(config.category_globs),
            "shard": f"{config.shard[0]}/{config.shard[1]}" if config.shard else None,
            "taskIds": [task.id for task in selected],
        },
        "runs": config.runs,
    }
    return manifest


def fingerprint(manifest: Mapping[str, Any], selected: Sequence[Task]) -> str:
    """SHA-256 over what changes what is measured: the selected tasks' definitions (before sharding), the tools, the backend and its settings, the runs."""
    return canonical_sha256(
        {
            "tasks": [task.sha256 for task in selected],
            "tools": manifest["taskFile"]["toolsSha256"],
            "system": manifest["systemPromptSha256"],
            "backend": manifest["backend"],
            "backendSettings": manifest["backendSettings"],
            "runs": manifest["runs"],
        }
    )


def git_state(folder: str) -> dict[str, Any]:
    """{"gitCommit", "gitDirty"} of the checkout around folder; nothing outside git or without git."""
    import subprocess

    try:
        commit = _git(folder, "rev-parse", "HEAD")
        dirty = _git(folder, "status", "--porcelain", "--untracked-files=no") != ""
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"gitCommit": commit, "gitDirty": dirty}


def _git(folder: str, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["git", *args], cwd=folder, capture_output=True, text=True, check=True, timeout=GIT_TIMEOUT
    ).stdout.strip()
