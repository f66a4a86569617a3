"""Evaluate a tool-using agent against canonical tasks and gate the release on its pass-rate."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from types import FrameType

from backends import BACKENDS, Backend, agent_request
from config import HARNESS_VERSION, parse_config
from records import BackendError, ConfigError, Reply, Result, Task
from report import result_line, results_document, summary_line, write_json_atomic
from scoring import score, summarize
from taskfile import load_task_file

# Error codes that mean the agent was never really asked: if every task ends in one, exit 3.
UNREACHABLE = {"reply:connect", "reply:tls", "reply:auth"}
EXIT_GATE_MET, EXIT_GATE_FAILED, EXIT_CONFIG, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def run_task(backend: Backend, task: Task) -> Result:
    """Send one task's request and score the reply; a BackendError becomes an error reply."""
    started = time.perf_counter()
    try:
        reply = backend.run(agent_request(task))
    except BackendError as err:
        reply = Reply.failed(err)
    duration_ms = (time.perf_counter() - started) * 1000
    return Result(task=task, reply=reply, outcome=score(task, reply), duration_ms=duration_ms)


def run_tasks(
    backend: Backend, tasks: Sequence[Task], concurrency: int, on_result: Callable[[Result], None]
) -> tuple[list[Result], bool]:
    """Run tasks `concurrency` at a time; report and return results in task-file order, and whether Ctrl-C cut the run short."""
    finished: dict[int, Result] = {}
    results: list[Result] = []
    # One at a time runs in this thread: handing each result across threads costs as much as a loopback request.
    completed = enumerate(run_task(backend, task) for task in tasks) if concurrency == 1 else _run_pool(backend, tasks, concurrency)
    try:
        for index, result in completed:
            finished[index] = result
            while len(results) in finished:
                results.append(finished.pop(len(results)))
                on_result(results[-1])
    except KeyboardInterrupt:
        for index in sorted(finished):
            results.append(finished[index])
            on_result(finished[index])
        return results, True
    return results, False


def _run_pool(backend: Backend, tasks: Sequence[Task], concurrency: int) -> Iterator[tuple[int, Result]]:
    """Yield (index, result) as worker threads complete them; closing the generator stops the workers."""
    todo = iter(enumerate(tasks))
    todo_lock = threading.Lock()
    stop = threading.Event()
    done: queue.SimpleQueue[tuple[int, Result | BaseException]] = queue.SimpleQueue()

    def worker() -> None:
        while not stop.is_set():
            with todo_lock:
                item = next(todo, None)
            if item is None:
                return
            index, task = item
            try:
                done.put((index, run_task(backend, task)))
            except BaseException as exc:  # a bug, not a verdict: hand it to the main thread
                done.put((index, exc))
                return

    # Daemon threads: on Ctrl-C the run ends now, not when the slowest in-flight request does.
    for _ in range(min(concurrency, len(tasks))):
        threading.Thread(target=worker, daemon=True).start()
    try:
        for _ in tasks:
            index, outcome = done.get()
            if isinstance(outcome, BaseException):
                raise outcome
            yield index, outcome
    finally:
        stop.set()


def say(line: str) -> None:
    """Print a console line; when the reader has gone (`| head`), carry on quietly: the results file gets everything."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Load, run, score, report, gate."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        config = parse_config(argv, os.environ)
        task_file = load_task_file(config.tasks_path)
        backend = BACKENDS[config.backend](config)
    except ConfigError as exc:
        print(f"eval_agent: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED

    settings = backend.describe()
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    where = f" at {settings['url']}" if "url" in settings else ""
    say(f"{len(task_file.tasks)} tasks from {task_file.path} on backend {config.backend}{where}")
    id_width = max(len(task.id) for task in task_file.tasks)
    results, interrupted = run_tasks(
        backend, task_file.tasks, config.concurrency, lambda result: say(result_line(result, id_width))
    )
    # The results are in: a late Ctrl-C must not leave them unwritten.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ran = {result.task.id for result in results}
    not_run = [task.id for task in task_file.tasks if task.id not in ran]
    summary = summarize(results, config.gate, len(not_run))

    document = results_document(
        harness_version=HARNESS_VERSION,
        run_id=config.run_id,
        backend=config.backend,
        backend_settings=settings,
        task_file={"path": task_file.path, "sha256": task_file.sha256},
        started_at=started_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        duration_ms=(time.perf_counter() - started) * 1000,
        summary=summary,
        results=results,
        interrupted=interrupted,
        not_run=not_run,
    )
    try:
        write_json_atomic(config.results_path, document)
    except OSError as exc:
        print(f"eval_agent: error: cannot write {config.results_path}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_CONFIG
    say(summary_line(summary))

    if interrupted:
        print(f"eval_agent: interrupted after {len(results)} of {len(task_file.tasks)} tasks", file=sys.stderr)
        return EXIT_INTERRUPTED
    if results and all(result.reply.error_code in UNREACHABLE for result in results):
        first = results[0].reply
        verb = "was refused by" if first.error_code == "reply:auth" else "could not reach"
        print(f"eval_agent: error: {verb} {settings.get('url', config.backend)}: {first.error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return EXIT_GATE_MET if summary.gate_passed else EXIT_GATE_FAILED


if __name__ == "__main__":
    raise SystemExit(main())
