"""Evaluate a tool-using agent against canonical tasks and gate the release on its pass-rate."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation

from backends import BACKENDS, Backend, agent_request
from records import BackendError, ConfigError, Reply, Result, Task
from report import result_line, results_document, summary_line, write_json_atomic
from scoring import score, summarize
from taskfile import load_task_file

HARNESS_VERSION = "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TASKS = os.path.join(HERE, "eval-tasks.json")
DEFAULT_RESULTS = "eval-results.json"
DEFAULT_GATE = "80"


@dataclass(frozen=True)
class Config:
    """The settings of one run, from flags over environment variables over defaults."""

    backend: str
    gate: Decimal
    tasks_path: str
    results_path: str


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as a ConfigError: one line, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    """The command line; every flag has an environment variable, and the flag wins."""
    parser = _Parser(
        prog="eval_agent.py",
        description=__doc__,
        epilog="Exit codes: 0 gate met, 1 gate not met, 2 usage or configuration error.",
    )
    parser.add_argument("--backend", help=f"where prompts go: {', '.join(BACKENDS)} (EVAL_BACKEND, default stub)")
    parser.add_argument("--gate", help=f"minimum pass-rate in percent, 0-100 (EVAL_GATE, default {DEFAULT_GATE})")
    parser.add_argument("--tasks", metavar="FILE", help="task file (EVAL_TASKS, default eval-tasks.json beside this script)")
    parser.add_argument("--out", metavar="FILE", help=f"results file (EVAL_RESULTS, default {DEFAULT_RESULTS})")
    parser.add_argument("--version", action="version", version=f"%(prog)s {HARNESS_VERSION}")
    return parser


def parse_config(argv: Sequence[str] | None, environ: Mapping[str, str]) -> Config:
    """Resolve every setting; ConfigError names the flag or variable that is wrong."""
    args = build_parser().parse_args(argv)

    def setting(flag: str, value: str | None, var: str, default: str) -> tuple[str, str]:
        if value is not None:
            return value, flag
        if environ.get(var):
            return environ[var], var
        return default, var

    backend, where = setting("--backend", args.backend, "EVAL_BACKEND", "stub")
    if backend not in BACKENDS:
        raise ConfigError(f"{where}: unknown backend {backend!r} (choose from: {', '.join(BACKENDS)})")
    gate_text, where = setting("--gate", args.gate, "EVAL_GATE", DEFAULT_GATE)
    try:
        gate = Decimal(gate_text.strip())
    except InvalidOperation:
        gate = Decimal("NaN")
    if not gate.is_finite() or not 0 <= gate <= 100:
        raise ConfigError(f"{where}: expected a percentage from 0 to 100, got {gate_text!r}")
    tasks_path, _ = setting("--tasks", args.tasks, "EVAL_TASKS", DEFAULT_TASKS)
    results_path, where = setting("--out", args.out, "EVAL_RESULTS", DEFAULT_RESULTS)
    folder = os.path.dirname(os.path.abspath(results_path))
    if not os.path.isdir(folder):
        raise ConfigError(f"{where}: cannot write {results_path}: no folder {folder}")
    return Config(backend=backend, gate=gate, tasks_path=tasks_path, results_path=results_path)


def run_task(backend: Backend, task: Task) -> Result:
    """Send one task's request and score the reply; a BackendError becomes an error reply."""
    started = time.perf_counter()
    try:
        reply = backend.run(agent_request(task))
    except BackendError as err:
        reply = Reply.failed(err)
    duration_ms = (time.perf_counter() - started) * 1000
    return Result(task=task, reply=reply, outcome=score(task, reply), duration_ms=duration_ms)


def run_tasks(backend: Backend, tasks: Sequence[Task], on_result: Callable[[Result], None]) -> list[Result]:
    """Run every task in task-file order, reporting each result as it comes."""
    results = []
    for task in tasks:
        result = run_task(backend, task)
        on_result(result)
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Load, run, score, report, gate."""
    try:
        config = parse_config(argv, os.environ)
        task_file = load_task_file(config.tasks_path)
        backend = BACKENDS[config.backend]()
    except ConfigError as exc:
        print(f"eval_agent: error: {exc}", file=sys.stderr)
        return 2

    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    print(f"{len(task_file.tasks)} tasks from {task_file.path} on backend {config.backend}")
    id_width = max(len(task.id) for task in task_file.tasks)
    results = run_tasks(backend, task_file.tasks, lambda result: print(result_line(result, id_width), flush=True))
    summary = summarize(results, config.gate)

    document = results_document(
        harness_version=HARNESS_VERSION,
        backend=config.backend,
        task_file={"path": task_file.path, "sha256": task_file.sha256},
        started_at=started_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        duration_ms=(time.perf_counter() - started) * 1000,
        summary=summary,
        results=results,
    )
    try:
        write_json_atomic(config.results_path, document)
    except OSError as exc:
        print(f"eval_agent: error: cannot write {config.results_path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(summary_line(summary))
    return 0 if summary.gate_passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
