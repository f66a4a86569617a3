"""What a run measured, recorded so that a results file can be trusted and compared a month later."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from harness import __commit__, __version__
from harness.config import Config
from harness.files import read_capped
from harness.records import Task, TaskFile
from harness.taskfile import canonical_sha256
from harness.text import sha256_hex

GIT_FILE_BYTES = 64 << 20  # packed-refs of a large repository; the others are a line


def run_manifest(
    config: Config,
    task_file: TaskFile,
    selected: Sequence[Task],
    backend: str,
    backend_settings: Mapping[str, Any],
    system: str | None,
) -> dict[str, Any]:
    """Harness, Python, platform, git commit, backend, task file, system prompt (its hash), selection and runs.

    The task file's ids are listed when the selection left some out; otherwise the selection's are the file's.
    """
    return {
        "harnessVersion": __version__,
        **({"harnessCommit": __commit__} if __commit__ else {}),
        "python": ".".join(map(str, sys.version_info[:3])),
        "platform": _platform(),
        **git_state(os.getcwd()),
        "backend": backend,
        "backendSettings": dict(backend_settings),
        "taskFile": {
            "path": task_file.path,
            "sha256": task_file.sha256,
            "toolsSha256": task_file.tools_sha256,
            # Which tasks the file has, when the selection does not say: compare tells a task left out of the
            # selection from one gone from the file.
            **({"taskIds": [task.id for task in task_file.tasks]} if len(selected) < len(task_file.tasks) else {}),
        },
        "systemPromptSha256": sha256_hex(system.encode("utf-8")) if system is not None else None,
        "selection": {
            "task": list(config.task_globs),
            "category": list(config.category_globs),
            "shard": f"{config.shard[0]}/{config.shard[1]}" if config.shard else None,
            "taskIds": [task.id for task in selected],
        },
        "runs": config.runs,
        **({"adaptive": config.auto.written()} if config.auto is not None else {}),  # --runs auto: runs is its most
    }


def _platform() -> str:
    """`Linux-6.8.0-x86_64-with-glibc2.39`, as platform.platform() says it on Linux, without the `uname -p` it runs."""
    if not hasattr(os, "uname"):  # Windows
        import platform

        return platform.platform()
    uname = os.uname()
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.39"
    except (ValueError, OSError):
        libc = ""
    return f"{uname.sysname}-{uname.release}-{uname.machine}" + (f"-with-{libc.replace(' ', '')}" if libc else "")


def fingerprint(manifest: Mapping[str, Any], selected: Sequence[Task]) -> str:
    """SHA-256 over what changes what is measured.

    The selected tasks' definitions (before sharding), the tools, the system prompt, the backend and its settings,
    the runs (and --runs auto's settings).
    """
    return canonical_sha256(
        {
            "tasks": [task.sha256 for task in selected],
            "tools": manifest["taskFile"]["toolsSha256"],
            "system": manifest["systemPromptSha256"],
            "backend": manifest["backend"],
            "backendSettings": manifest["backendSettings"],
            "runs": manifest["runs"],
            **({"adaptive": manifest["adaptive"]} if "adaptive" in manifest else {}),
        }
    )


def git_state(folder: str) -> dict[str, Any]:
    """{"gitCommit": SHA} of the checkout around folder, read from .git without running git; {} outside git, or when
    its files cannot be read (the commit is what a run records, never a reason to stop it)."""
    try:
        git = _git_dir(os.path.abspath(folder))
        if git is None:
            return {}
        head = _git_text(os.path.join(git, "HEAD")).strip()
        if not head.startswith("ref: "):
            return {"gitCommit": head}
        ref = head[5:]
        common = _common_dir(git)
        for base in (git, common):
            path = os.path.join(base, ref)
            if os.path.exists(path):
                return {"gitCommit": _git_text(path).strip()}
        for line in _git_text(os.path.join(common, "packed-refs")).splitlines():
            sha, _, name = line.strip().partition(" ")
            if name == ref:
                return {"gitCommit": sha}
    except (OSError, ValueError):  # ValueError: not UTF-8
        pass
    return {}  # a branch with no commit yet


def _git_text(path: str) -> str:
    """A file of git's as text: a regular file under GIT_FILE_BYTES, or OSError."""
    raw = read_capped(path, GIT_FILE_BYTES)
    if len(raw) > GIT_FILE_BYTES:
        raise OSError(errno.EFBIG, f"over {GIT_FILE_BYTES} bytes")
    return raw.decode("utf-8")


def _git_dir(folder: str) -> str | None:
    """The .git folder of the checkout that holds folder (a worktree's .git file points to it)."""
    while True:
        candidate = os.path.join(folder, ".git")
        if os.path.isdir(candidate):
            return candidate
        if os.path.isfile(candidate):
            pointer = _git_text(candidate).strip()
            if pointer.startswith("gitdir: "):
                return os.path.normpath(os.path.join(folder, pointer[8:]))
            return None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _common_dir(git: str) -> str:
    """Where branches live: the main .git folder, for a linked worktree too."""
    try:
        return os.path.normpath(os.path.join(git, _git_text(os.path.join(git, "commondir")).strip()))
    except OSError:
        return git
