"""Build dist/eval_agent.pyz: the harness as one file that runs with any Python 3.10 or newer.

Usage: python3 tools/build_pyz.py [TARGET]   (make dist)

The archive is a zipapp (a `#!/usr/bin/env python3` line, then a zip with a __main__.py) holding the entrypoint, the
engine and the backends, nothing else. It is reproducible: its entries are sorted, dated 1980-01-01 and given one mode,
so two builds from the same commit are the same bytes; and it records that commit, which `--version` shows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.manifest import git_state  # noqa: E402  (the build reads the commit as a run reads the user's)

PACKAGES = ("harness", "backends")
DATA = (".py", ".json")
SHEBANG = b"#!/usr/bin/env python3\n"
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold: no build time leaks into the bytes
MAIN = b'''"""The agent eval harness as one file: python3 eval_agent.pyz [SETTING ...], or SUBCOMMAND ... (--help)."""

import runpy

runpy.run_module("eval_agent", run_name="__main__", alter_sys=True)
'''
COMMIT_LINE = b"__commit__: str | None = None"


def sources(root: str = ROOT) -> dict[str, bytes]:
    """What goes into the archive, by name inside it: eval_agent.py, and the packages' modules and data."""
    files = {"eval_agent.py": _read(os.path.join(root, "eval_agent.py"))}
    for package in PACKAGES:
        for folder, dirs, names in os.walk(os.path.join(root, package)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                if name.endswith(DATA):
                    path = os.path.join(folder, name)
                    files[os.path.relpath(path, root).replace(os.sep, "/")] = _read(path)
    return files


def commit(root: str = ROOT) -> str:
    """The commit the sources are at, `+changes` when the packaged files differ from it; `unknown` outside git."""
    sha = git_state(root).get("gitCommit")
    if not sha:
        return "unknown"
    try:
        changed = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "eval_agent.py", *PACKAGES],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return sha
    return f"{sha}+changes" if changed else sha


def build(target: str, root: str = ROOT) -> str:
    """Write the archive to target (atomically, executable); return the commit it records."""
    files = sources(root)
    stamp = commit(root)
    init = files["harness/__init__.py"]
    if init.count(COMMIT_LINE) != 1:
        raise SystemExit("tools/build_pyz.py: harness/__init__.py has no line to record the commit in")
    files["harness/__init__.py"] = init.replace(COMMIT_LINE, f"__commit__: str | None = {stamp!r}".encode())
    files["__main__.py"] = MAIN
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    temporary = f"{target}.tmp"
    with open(temporary, "wb") as f:
        f.write(SHEBANG)
        with zipfile.ZipFile(f, "w") as archive:
            for name in sorted(files):
                entry = zipfile.ZipInfo(name, EPOCH)
                entry.external_attr = 0o100644 << 16
                entry.create_system = 3  # Unix, whatever builds it
                archive.writestr(entry, files[name], zipfile.ZIP_DEFLATED, 9)
    os.chmod(temporary, 0o755)
    os.replace(temporary, target)
    return stamp


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "dist", "eval_agent.pyz")
    recorded = build(target)
    print(f"built {target} ({os.path.getsize(target):,} bytes) from {recorded}")
