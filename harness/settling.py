"""--runs auto's sending: each task repeated until its sequential test settles it, its trials handed on in trial order,
and each task handed on in task-file order once settled; a run of fixed --runs never imports it."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection, Generator, Sequence
from typing import TYPE_CHECKING

from harness.adaptive import Test, fewest_further, verdict
from harness.leaks import NO_SECRETS, Secrets
from harness.records import Backend, Result, Served, Task
from harness.running import (
    INTERRUPTED,
    WAIT_SPELL,
    Ending,
    HandingOn,
    InTaskOrder,
    drain,
    run_task,
)

if TYPE_CHECKING:
    from harness.serving.models import ModelProxy


def run_until_settled(
    backend: Backend,
    tasks: Sequence[Task],
    test: Test,
    concurrency: int,
    on_result: Callable[[Result], None],
    secrets: Secrets = NO_SECRETS,
    hidden: Secrets = NO_SECRETS,
    tools: Collection[str] = (),
    served: Served | None = None,
    proxy: ModelProxy | None = None,
) -> Ending:
    """--runs auto: repeat each task until the sequential test settles it, `concurrency` trials at a time, and hand on
    each task's results in its trial order; how the run ends, and what it hands on when cut short, as run_jobs says.

    A task has in flight only the trials the test needs whatever the others answer (the fewest further trials before
    any verdict is possible, after its results so far in trial order): so its trials, and its verdict, are the same at
    any concurrency, and a replay asks its cassette for the trials the recording sent.
    """
    rooms: dict[tuple[int, int], int] = {}  # (passes, trials) -> fewest further: a few dozen states for every task

    count = len(tasks)
    sent, taken, passes = [0] * count, [0] * count, [0] * count  # taken: the trials handed on, in trial order
    room = [fewest_further(test, 0, 0)] * count  # how many may be in flight after the trials taken
    waiting: list[dict[int, Result]] = [{} for _ in tasks]  # finished, not yet taken: a trial before it is still out
    ready: deque[int] = deque()  # tasks started that may send another trial, each once
    queued = [False] * count
    started = 0

    def take() -> tuple[int, int] | None:
        """The next trial to send (the task's index, the trial's number), or None while none may be sent."""
        nonlocal started
        while True:
            if not ready:
                if started == count:
                    return None
                ready.append(started)
                queued[started] = True
                started += 1
            index = ready[0]
            if sent[index] - taken[index] < room[index]:
                sent[index] += 1
                return index, sent[index]
            ready.popleft()
            queued[index] = False

    def run(job: tuple[int, int]) -> Result:
        return run_task(backend, tasks[job[0]], secrets, hidden, tools, job[1], served, proxy)

    def hand_on(index: int) -> None:
        """Hand on the task's results that now follow its last in trial order; make room for the trials it needs."""
        trials = waiting[index]
        HandingOn.now = True
        try:
            while taken[index] + 1 in trials:
                result = trials.pop(taken[index] + 1)
                on_result(result)
                taken[index] += 1
                passes[index] += result.outcome.status == "pass"
        finally:
            HandingOn.now = False
        state = passes[index], taken[index]
        if state not in rooms:
            rooms[state] = fewest_further(test, *state)
        room[index] = rooms[state]  # 0 once settled
        if not queued[index] and sent[index] - taken[index] < room[index]:
            ready.append(index)
            queued[index] = True

    def finished(job: tuple[int, int], result: Result) -> None:
        index, trial = job
        waiting[index][trial] = result
        hand_on(index)

    def finish(cut: bool) -> None:
        if cut:
            for (index, trial), result in leftovers.items():
                waiting[index][trial] = result
        for trials in waiting:  # a cut-short task's finished trials, in trial order, a gap before them or not
            for trial in sorted(trials):
                on_result(trials[trial])

    leftovers: dict[tuple[int, int], Result] = {}
    workers = min(concurrency, count * test.most)
    # A wave is as many endings in a row as may be in flight at once: a few tasks have fewer than the workers, only
    # what their tests need, and would be settled unreliable on their rate-limited endings before a wave of the workers
    wave = max(1, min(workers, count * room[0])) if count else 1
    pool = _settling_pool(run, take, workers, leftovers) if workers > 1 else None
    completed = pool if pool is not None else ((job, run(job)) for job in iter(take, None))
    return drain(completed, pool, finished, finish, wave)


def _settling_pool(
    run: Callable[[tuple[int, int]], Result],
    take: Callable[[], tuple[int, int] | None],
    concurrency: int,
    leftovers: dict[tuple[int, int], Result],
) -> Generator[tuple[tuple[int, int], Result], None, None]:
    """Yield (job, result) as `concurrency` worker threads complete the jobs take() gives, asked again after each
    result is yielded (it may free more); closing the generator stops the workers, and puts the results they had
    finished but not yet yielded in leftovers. As _run_pool, with the jobs not known ahead."""
    import queue

    todo: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
    done: queue.SimpleQueue[tuple[tuple[int, int], Result | BaseException]] = queue.SimpleQueue()
    stop = threading.Event()
    out = 0  # jobs handed out, their results not yet yielded

    def worker() -> None:
        while (job := todo.get()) is not None and not stop.is_set():
            try:
                done.put((job, run(job)))
            except BaseException as exc:  # a bug, not a verdict: hand it to the main thread
                done.put((job, exc))
                return

    def hand_out() -> None:
        nonlocal out
        while out < 2 * concurrency and (job := take()) is not None:
            todo.put(job)
            out += 1

    try:
        for _ in range(concurrency):
            threading.Thread(target=worker, daemon=True).start()
        hand_out()
        while out:
            while True:
                try:
                    job, outcome = done.get(timeout=WAIT_SPELL)
                    break
                except queue.Empty:
                    if INTERRUPTED.is_set():
                        raise KeyboardInterrupt from None
            out -= 1
            if isinstance(outcome, BaseException):
                raise outcome
            yield job, outcome
            hand_out()
    finally:
        stop.set()
        for _ in range(concurrency):
            todo.put(None)
        while True:
            try:
                job, outcome = done.get_nowait()
            except queue.Empty:
                break
            if not isinstance(outcome, BaseException):
                leftovers[job] = outcome


class InTaskOrderSettled(InTaskOrder):
    """InTaskOrder for --runs auto: a task is handed on once the sequential test has settled it."""

    def __init__(self, tasks: Sequence[Task], test: Test, on_task: Callable[[Task, Sequence[Result]], None]) -> None:
        super().__init__(tasks, test.most, on_task)
        self.test = test
        self.passes: dict[str, int] = {}
        self.settled: dict[tuple[int, int], bool] = {}  # (passes, trials) -> whether the test has a verdict

    def add(self, result: Result) -> None:
        """One more finished trial, the next of its task's in trial order."""
        self.count += 1
        task_id = result.task.id
        self.trials.setdefault(task_id, []).append(result)
        self.passes[task_id] = self.passes.get(task_id, 0) + (result.outcome.status == "pass")
        while self.handed < len(self.tasks) and self._settled(self.tasks[self.handed].id):
            task = self.tasks[self.handed]
            self.passes.pop(task.id)
            self.on_task(task, self.trials.pop(task.id))
            self.handed += 1

    def _settled(self, task_id: str) -> bool:
        trials = len(self.trials.get(task_id, ()))
        if not trials:
            return False
        state = self.passes[task_id], trials
        if state not in self.settled:
            self.settled[state] = verdict(self.test, *state) != "continue"
        return self.settled[state]
