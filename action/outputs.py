"""The action's outputs: which of the run's files this run wrote, told from what stood there before it started, and
the verdict from the results it wrote, appended to GITHUB_OUTPUT so that no value can add a line of its own.

python3 outputs.py before RESULTS JUNIT HTML        prints what stands at each path now (one line of JSON)
python3 outputs.py after CODE BEFORE RESULTS JUNIT HTML   appends the step's outputs to $GITHUB_OUTPUT

An empty path is a report not asked for. Run by action/run.sh; the harness's files are written by replacing them
(a new file each time), so a path that holds another file than before holds this run's.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

Signature = list[int] | None  # device, inode, modification time (ns), size; None when nothing stands there

NAMES = ("EVAL_RESULTS", "EVAL_JUNIT", "EVAL_HTML")


def signature(path: str) -> Signature:
    """What stands at the path now."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return [found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size]


def output(name: str, value: str) -> str:
    """`name=value`, or for a value with a line break the delimiter form with a delimiter that is not in the value."""
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}\n"
    delimiter = f"ghadelimiter_{os.urandom(16).hex()}"
    while delimiter in value:
        delimiter = f"ghadelimiter_{os.urandom(16).hex()}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def before(paths: Sequence[str]) -> int:
    """Print what stands at each path; a path with a line break is refused (exit 2): no list of files could hold it; so
    is one with a character the upload reads as a pattern (`*`, `?`, `[`), which would take older files along."""
    for name, path in zip(NAMES, paths, strict=True):
        if "\n" in path or "\r" in path:
            print(f"eval_agent action: error: {name}: a file name with a line break, {path!r}", file=sys.stderr)
            return 2
        if any(character in path for character in "*?["):
            why = "a file name the upload would read as a pattern"
            print(f"eval_agent action: error: {name}: {why}, {path!r}", file=sys.stderr)
            return 2
    print(json.dumps([signature(path) if path else None for path in paths]))
    return 0


def after(code: str, earlier: str, paths: Sequence[str]) -> int:
    """Append the step's outputs: the exit code, the verdict from the results this run wrote, the files it wrote."""
    # Without a record of before, the run never started: whatever stands there is older.
    signatures = json.loads(earlier) if earlier else [signature(path) if path else None for path in paths]
    written = [
        os.path.abspath(path)
        for path, was in zip(paths, signatures, strict=True)
        if path and (now := signature(path)) is not None and now != was
    ]
    results = os.path.abspath(paths[0]) if paths[0] and os.path.abspath(paths[0]) in written else ""
    rate, passed = "", "false"
    if results:
        try:
            with open(results, encoding="utf-8") as f:
                document = json.load(f)
            rate, passed = str(document["passRate"]), "true" if document["gatePassed"] is True else "false"
        except (OSError, ValueError, KeyError, TypeError):
            results = ""
    values = {
        "exit-code": code,
        "results-path": results,
        "pass-rate": rate,
        "gate-passed": passed,
        "written": "\n".join(written),
    }
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
        f.write("".join(output(name, value) for name, value in values.items()))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "before":
        raise SystemExit(before(sys.argv[2:]))
    raise SystemExit(after(sys.argv[2], sys.argv[3], sys.argv[4:]))
