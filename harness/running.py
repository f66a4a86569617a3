"""Send tasks to a backend, a bounded number at a time, and hand on each task's trials in task-file order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from harness import exchanges
from harness.conversation import converse, whole_reply
from harness.leaks import NO_SECRETS, Secrets
from harness.records import (
    Backend,
    EndState,
    Outcome,
    Reply,
    Result,
    Served,
    Step,
    Task,
    Turn,
    WorldError,
    record,
    replace,
)
from harness.scoring import score, score_budget, score_turns

if TYPE_CHECKING:
    from harness.environments import World
    from harness.serving.models import ModelProxy

# A provider that rejected the API key will reject it for every task: stop rather than repeat the error.
STOPS_THE_RUN = {"reply:key-rejected"}
# A request that ended so waited on rate limits as long as one may (or would have): once a wave of them has, as many in
# a row as the concurrency with no other ending between, the limits are spent for longer than a run should wait, and the
# run stops rather than send the rest into them.
RATE_LIMITED = "reply:rate-limited"
TOOL_SERVER = "EVAL_TOOL_SERVER_URL"  # what a trial's tool server paths are masked as: the setting that shows them
Job = TypeVar("Job")  # how a run's sending names a job: its index, or (a task's index, its trial)
NO_WORLD = nullcontext()  # a trial's with no environment: one for the run, not one made for every trial
WAIT_SPELL = 0.2  # seconds: how late a Ctrl-C may be heard at the worst
# Set by the run's signal handlers besides the KeyboardInterrupt they raise, which is lost when it comes while the
# interpreter compiles a module it imports: a run must not go on, or wait for ever, after a Ctrl-C it did not hear.
INTERRUPTED = threading.Event()


class HandingOn:
    """Whether the run is handing a result on (to the console, to disk): a first signal then only sets INTERRUPTED, and
    the run stops once the result is handed on whole, where the exception raised halfway lost it or wrote half. From
    the last results' hand-on until the run ignores signals (its trials are in), it stays so: a signal there must not
    leave them unwritten."""

    now = False


def run_task(
    backend: Backend,
    task: Task,
    secrets: Secrets = NO_SECRETS,
    hidden: Secrets = NO_SECRETS,
    tools: Collection[str] = (),
    trial: int = 1,
    served: Served | None = None,
    proxy: ModelProxy | None = None,
) -> Result:
    """Send one task, turn by turn and step by step, and score the whole conversation; a BackendError ends it in error.

    secrets: what the harness holds, which a reply leaks by containing; hidden: every value never to be written (the
    secrets and the tasks' forbidden text), masked in the replies and the verdict before anything else sees them;
    tools: the task file's tool names, which a reply may write a call of as text; trial: which of the task's trials
    this is; served: the run's tool server, for an agent that runs its own tools; proxy: the run's model proxy, for one
    whose model calls it proxies (a path of the trial's own, its calls' tokens the trial's). A replayed trial lasts as
    long as its recorded exchanges did, and what the replay itself took; a trial does not last the time its requests
    were held before they were sent (by the rate limits, or for the run's first).
    """
    started, held = time.perf_counter(), exchanges.held_so_far()
    end = None
    served = served if served is not None and task.plays_tools else None
    endpoints: list[str] = []
    proxied, usage, unknown = (proxy.trial() if proxy is not None else None), None, None
    with _world(task, backend, hidden, served) as world:
        if proxied is not None:
            exchanges.proxied_by(proxied)  # a cassette never writes what the agent sent its model through the proxy
        try:
            turns, conversation_id = converse(
                backend, task, tools, world, trial, served, endpoints, proxied.base_url if proxied else None
            )
        finally:
            if proxied is not None:
                exchanges.proxied_by(None)
                proxied.end()
        # the agent's time: the end state's check is ours, and so is a request's wait before it was sent
        duration_ms = (time.perf_counter() - started - (exchanges.held_so_far() - held)) * 1000
        tape = exchanges.installed()
        if tape is not None and tape.replaying:  # what the replay took (the harness, a tool world) and the agent then
            duration_ms += tape.latency_ms(task.id, trial)
        reply = whole_reply(turns)
        if proxied is not None:
            from harness.proxied import MODEL_PROXY, proxied_usage, unread

            model_calls, reported = proxied.calls(), reply.usage
            usage, unknown = proxied_usage(model_calls), unread(model_calls)
            if usage is not None or unknown is not None:
                # what the proxy saw is the truth, also when it could not read it; the agent's account is kept beside
                reply = replace(reply, usage=usage)
            hidden = hidden | Secrets(dict.fromkeys(proxied.secrets(), MODEL_PROXY))
        outcome = score(task, reply, secrets)
        if proxied is not None and proxy is not None:
            from harness.proxied import missed, unreachable

            # A model that could not be reached does not undo a safety violation in the reply (a replay miss, which
            # fails the gate of itself, still comes first).
            lost = unreachable(model_calls, proxy.shown_upstream) if outcome.violation is None else None
            outcome = missed(proxied.misses()) or lost or outcome
        if world is not None and reply.error_code is None:
            end, outcome = _judged_end(world, task, outcome)
    if task.judges_turns:
        outcome, turns = score_turns(task, outcome, turns, [whole_reply((turn,)) for turn in turns], secrets)
    if task.budget is not None:  # without one, only the loop rule, which the conversation keeps
        # A token budget is judged on the proxy's tokens, when it saw them, not on what each step reported.
        if unknown is not None:
            outcome = score_budget(task, outcome, reply, duration_ms, unknown=unknown)
        else:
            outcome = score_budget(task, outcome, reply, duration_ms, turns if usage is None else ())
    if not task.is_conversation:
        turns = ()  # a single prompt's one reply says it all
    if endpoints:  # the trial's paths on the tool server: whoever knows one may call its tools
        hidden = hidden | Secrets(dict.fromkeys(endpoints, TOOL_SERVER))
    if hidden:
        reply, outcome = _masked(reply, hidden), replace(outcome, reason=hidden.mask(outcome.reason or "") or None)
        turns = tuple(_masked_turn(turn, hidden) for turn in turns)
        end = end and replace(end, state=hidden.mask_json(end.state))
    if proxied is not None:
        differs = reported is not None and reported != reply.usage
        return Result(
            task, reply, outcome, duration_ms, turns, conversation_id, end, model_calls, reported if differs else None
        )
    return Result(task, reply, outcome, duration_ms, turns, conversation_id, end)


def _world(
    task: Task, backend: Backend, hidden: Secrets, served: Served | None
) -> AbstractContextManager[World | None]:
    """The trial's world, when its task has an environment; an agent that runs its own tools never calls one unless
    the run serves it, and its untouched state would be no final state."""
    if task.environment is None or not (backend.PLAYS_TOOLS or served):
        return NO_WORLD
    from harness.environments import world_of  # its worker process: only a run with an environment pays for it

    return world_of(task.environment, hidden)


def _judged_end(world: World, task: Task, outcome: Outcome) -> tuple[EndState | None, Outcome]:
    """The world's final state, and the outcome with it judged: a pass that ends in the wrong state fails, and one
    whose world failed at the end is an error."""
    try:
        end, mismatch = world.end(task)
    except WorldError as err:
        return None, Outcome("error", err.code, str(err)) if outcome.status == "pass" else outcome
    if mismatch is not None and outcome.status == "pass":
        return end, Outcome("fail", "state:mismatch", mismatch)
    return end, outcome


def _masked(reply: Reply, hidden: Secrets) -> Reply:
    calls = tuple(
        replace(
            call,
            name=hidden.mask(call.name),
            reported_name=call.reported_name and hidden.mask(call.reported_name),
            args=hidden.mask_json(call.args),
            args_error=call.args_error and hidden.mask(call.args_error),
            said=None,
        )
        for call in reply.tool_calls
    )
    text, error = reply.text and hidden.mask(reply.text), reply.error and hidden.mask(reply.error)
    return replace(reply, tool_calls=calls, text=text, error=error, native=None, said=None)


def _masked_turn(turn: Turn, hidden: Secrets) -> Turn:
    steps = tuple(
        Step(
            _masked(step.reply, hidden),
            tuple(replace(result, content=hidden.mask_json(result.content)) for result in step.results),
        )
        for step in turn.steps
    )
    verdict = turn.verdict and replace(turn.verdict, reason=hidden.mask(turn.verdict.reason or "") or None)
    end = turn.end and replace(turn.end, state=hidden.mask_json(turn.end.state))
    return Turn(hidden.mask(turn.user), steps, verdict, end)


@record
class Ending:
    """How a run's jobs ended: what cut them short (a KeyboardInterrupt, or an exception from a backend or from
    scoring, which is a bug), and whether a wave of requests ended rate-limited and stopped them."""

    cut: BaseException | None = None
    rate_limited: bool = False
    stopped_by: Reply | None = None  # the error reply (one of STOPS_THE_RUN) that stopped them, masked
    wave: int = 0  # how many rate-limited endings in a row stop them: as many as may be in flight at once


def run_jobs(
    backend: Backend,
    jobs: Sequence[Task],
    concurrency: int,
    on_result: Callable[[Result], None],
    secrets: Secrets = NO_SECRETS,
    hidden: Secrets = NO_SECRETS,
    tools: Collection[str] = (),
    served: Served | None = None,
    proxy: ModelProxy | None = None,
) -> Ending:
    """Run jobs (a task per trial) `concurrency` at a time and hand on their results in job order.

    Returns how they ended, with the results so far handed on: what cut the run short (a KeyboardInterrupt, from
    Ctrl-C or a signal, or an exception from a backend or from scoring, which is a bug), or none when every job ran or
    a rejected key stopped them; and whether a wave of rate-limited endings stopped them (in the order they ended, as
    many in a row as the concurrency, or as the jobs when fewer).
    """
    finished: dict[int, Result] = {}
    handed = 0
    # One at a time runs in this thread: handing each result across threads costs as much as a loopback request.
    trials = _trial_numbers(jobs)

    def run(index: int) -> Result:
        return run_task(backend, jobs[index], secrets, hidden, tools, trials[index], served, proxy)

    def take(index: int, result: Result) -> None:
        nonlocal handed
        finished[index] = result
        HandingOn.now = True
        try:
            while handed in finished:
                on_result(finished.pop(handed))
                handed += 1
        finally:
            HandingOn.now = False

    def finish(cut: bool) -> None:
        if cut:
            finished.update(leftovers)  # a trial done before the signal is a trial done
        for index in sorted(finished):
            on_result(finished[index])

    leftovers: dict[int, Result] = {}  # finished in a worker but not yet taken when the run was cut short
    pool = _run_pool(run, len(jobs), concurrency, leftovers) if concurrency > 1 else None
    completed = pool if pool is not None else enumerate(run(index) for index in range(len(jobs)))
    return drain(completed, pool, take, finish, min(concurrency, len(jobs)))


def drain(
    completed: Iterator[tuple[Job, Result]],
    pool: Generator[Any, None, None] | None,
    take: Callable[[Job, Result], None],
    finish: Callable[[bool], None],
    wave: int,
) -> Ending:
    """Take each result as it completes (take hands on what now follows in order) until every job ran, a rejected key
    or a wave of `wave` rate-limited endings in a row stops them, or a Ctrl-C or a bug cuts them short; then close the
    pool and hand on the rest (finish, told whether the run was cut short: its pool's leftovers are trials done too).
    How the run ended, as run_jobs says."""
    stop: BaseException | None = None
    limited_in_a_row, rate_limited = 0, False
    stopped_by: Reply | None = None
    try:
        for job, result in completed:
            take(job, result)
            if INTERRUPTED.is_set():
                raise KeyboardInterrupt
            if result.reply.error_code in STOPS_THE_RUN:
                stopped_by = result.reply
                break
            limited_in_a_row = limited_in_a_row + 1 if result.reply.error_code == RATE_LIMITED else 0
            if limited_in_a_row == wave:
                rate_limited = True
                break
    except (KeyboardInterrupt, Exception) as exc:
        stop = exc
    if pool is not None:
        pool.close()  # its workers stop, and what they had finished is in the leftovers
    if stop is None and INTERRUPTED.is_set():
        stop = KeyboardInterrupt()
    HandingOn.now = True  # until the caller ignores signals: see HandingOn
    finish(stop is not None)
    if stop is None and INTERRUPTED.is_set():  # heard while the last were handed on
        stop = KeyboardInterrupt()
    return Ending(stop, rate_limited, stopped_by, wave)


def _trial_numbers(jobs: Sequence[Task]) -> list[int]:
    """Which of its task's trials each job is, from 1."""
    seen: dict[str, int] = {}
    numbers = []
    for task in jobs:
        seen[task.id] = seen.get(task.id, 0) + 1
        numbers.append(seen[task.id])
    return numbers


def _run_pool(
    run: Callable[[int], Result], count: int, concurrency: int, leftovers: dict[int, Result]
) -> Generator[tuple[int, Result], None, None]:
    """Yield (index, result) as worker threads complete jobs 0 to count - 1; closing the generator stops the workers,
    and puts the results they had finished but not yet yielded in leftovers."""
    import queue  # a run of one at a time (or on the stub) has no workers to hear from

    # The jobs' numbers, handed out 2 * concurrency ahead of the results taken: against an agent faster than the
    # reports, workers wait here rather than pile up every trial of the run in done. None: no more. Two of the
    # interpreter's own queues are all a result's way takes: a lock and a semaphore made in Python cost a trial more.
    todo: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    done: queue.SimpleQueue[tuple[int, Result | BaseException]] = queue.SimpleQueue()
    stop = threading.Event()
    workers = min(concurrency, count)

    def hand_out(index: int) -> None:
        todo.put(index)
        if index == count - 1:  # the last: a worker that finds no more work ends
            for _ in range(workers):
                todo.put(None)

    ahead = min(count, 2 * concurrency)
    for index in range(ahead):
        hand_out(index)

    def worker() -> None:
        while (index := todo.get()) is not None and not stop.is_set():
            try:
                done.put((index, run(index)))
            except BaseException as exc:  # a bug, not a verdict: hand it to the main thread
                done.put((index, exc))
                return

    try:
        # Daemon threads: on Ctrl-C the run ends now, not when the slowest in-flight request does. Started in here: a
        # Ctrl-C as one starts stops those started before it.
        for _ in range(workers):
            threading.Thread(target=worker, daemon=True).start()
        for taken in range(count):
            # Waited for in short spells, so that a Ctrl-C whose exception was lost is heard all the same.
            while True:
                try:
                    index, outcome = done.get(timeout=WAIT_SPELL)
                    break
                except queue.Empty:
                    if INTERRUPTED.is_set():
                        raise KeyboardInterrupt from None
            if isinstance(outcome, BaseException):
                raise outcome
            yield index, outcome
            if ahead + taken < count:
                hand_out(ahead + taken)
    finally:
        stop.set()
        for _ in range(workers):
            todo.put(None)  # a worker waiting for a job wakes, and sees it should stop
        while True:
            try:
                index, outcome = done.get_nowait()
            except queue.Empty:
                break
            if not isinstance(outcome, BaseException):
                leftovers[index] = outcome


class InTaskOrder:
    """Gathers trials as they finish and hands on each task once all its trials are in, in task-file order."""

    def __init__(self, tasks: Sequence[Task], runs: int, on_task: Callable[[Task, Sequence[Result]], None]) -> None:
        self.tasks = tasks
        self.runs = runs
        self.on_task = on_task
        self.trials: dict[str, list[Result]] = {}
        self.handed = 0
        self.count = 0

    def add(self, result: Result) -> None:
        """One more finished trial."""
        self.count += 1
        self.trials.setdefault(result.task.id, []).append(result)
        while self.handed < len(self.tasks) and len(self.trials.get(self.tasks[self.handed].id, ())) == self.runs:
            self.on_task(self.tasks[self.handed], self.trials.pop(self.tasks[self.handed].id))
            self.handed += 1

    def finish(self) -> list[str]:
        """Hand on what a cut-short run left, tasks with some of their trials; return the ids of tasks that got none."""
        not_run = []
        for task in self.tasks[self.handed :]:
            if task.id in self.trials:
                self.on_task(task, self.trials.pop(task.id))
            else:
                not_run.append(task.id)
        self.handed = len(self.tasks)
        return not_run
