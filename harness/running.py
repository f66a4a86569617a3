"""Send tasks to a backend, a bounded number at a time, and hand back results in order."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from backends import Backend, agent_request
from harness.records import BackendError, Reply, Result, Task, TaskResult
from harness.scoring import score

# A provider that rejected the API key will reject it for every task: stop rather than repeat the error.
STOPS_THE_RUN = {"reply:key-rejected"}


def run_task(backend: Backend, task: Task) -> Result:
    """Send one task's request and score the reply; a BackendError becomes an error reply."""
    started = time.perf_counter()
    try:
        reply = backend.run(agent_request(task))
    except BackendError as err:
        reply = Reply.failed(err)
    duration_ms = (time.perf_counter() - started) * 1000
    return Result(task=task, reply=reply, outcome=score(task, reply), duration_ms=duration_ms)


def run_jobs(
    backend: Backend, jobs: Sequence[Task], concurrency: int, on_result: Callable[[Result], None]
) -> tuple[list[Result], bool]:
    """Run jobs (a task per trial) `concurrency` at a time; report and return results in job order, and whether Ctrl-C cut the run short."""
    finished: dict[int, Result] = {}
    results: list[Result] = []
    interrupted = False
    # One at a time runs in this thread: handing each result across threads costs as much as a loopback request.
    completed = enumerate(run_task(backend, task) for task in jobs) if concurrency == 1 else _run_pool(backend, jobs, concurrency)
    try:
        for index, result in completed:
            finished[index] = result
            while len(results) in finished:
                results.append(finished.pop(len(results)))
                on_result(results[-1])
            if result.reply.error_code in STOPS_THE_RUN:
                break
    except KeyboardInterrupt:
        interrupted = True
    for index in sorted(finished):
        results.append(finished[index])
        on_result(finished[index])
    return results, interrupted


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


def group_trials(tasks: Sequence[Task], results: Sequence[Result]) -> list[TaskResult]:
    """Each task with its trials, in task order; tasks that got no result are left out."""
    trials: dict[str, list[Result]] = {}
    for result in results:
        trials.setdefault(result.task.id, []).append(result)
    return [TaskResult(task, tuple(trials[task.id])) for task in tasks if task.id in trials]
