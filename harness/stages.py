"""A run's stages once it is set up: send every trial, judge the run, write the results, report.

The entrypoint's prepare makes the Run they share (it alone knows the backends); its run calls them in order.
"""

from __future__ import annotations

# The built-in signal module: `signal` itself makes three enums of them as it is imported (0.5 ms of every start).
import _signal  # type: ignore[import-not-found]
import gc
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness import exchanges
from harness.config import Config
from harness.leaks import Secrets
from harness.manifest import fingerprint, run_manifest
from harness.records import AgentSurface, Backend, Result, Served, Summary, Task, TaskFile, Unreachable, record
from harness.reporters import publish, unreachable_reason
from harness.reporters.console import Console, Progress, complain, say
from harness.results import Spool, results_document, task_entry
from harness.running import Ending, HandingOn, InTaskOrder, run_jobs
from harness.text import count, headline, internal_error, utc_timestamp
from harness.verdict import EXIT_INTERRUPTED, EXIT_UNREACHABLE, Tallies, decide

if TYPE_CHECKING:
    from typing import Protocol

    from harness.cassette import Tape
    from harness.comparison import Comparison
    from harness.records import Pacing
    from harness.serving.models import ModelProxy

    class Pacer(Protocol):
        """What a run asks of the pacer of a backend that posts through a Transport (the engine imports no backend)."""

        def open(self, ceiling: int) -> None: ...
        def state(self) -> Pacing: ...


# Ctrl-C is SIGINT; these end a run the same way: a CI job cancelled (SIGTERM), a terminal closed (SIGHUP).
STOP_SIGNALS = tuple(getattr(_signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(_signal, name))
# What a task's entry in the results says of the task itself, as its task file has it (its id aside: see on_task).
TASK_TEXT = ("category", "expected", "prompt")


@record(kw_only=True)
class Run:
    """A run set up, every check that can refuse it made and nothing sent: made in one place, the entrypoint's prepare.

    Frozen as a record is; what it holds may change as the run goes: the backend's connections, the cassette's entries.
    """

    config: Config
    task_file: TaskFile
    selected: Sequence[Task]  # what the selection chose, before a shard's slice: what a baseline's ids are compared to
    tasks: Sequence[Task]  # what this run sends
    surface: AgentSurface
    backend_name: str
    backend: Backend
    settings: Mapping[str, Any]  # the backend's, masked, as the console and the results show them
    # The secrets by role: a leak when a reply holds one (the environment's, the tasks', the backend's, those a
    # cassette's replies held); never written (these, the forbidden text, the query values of the backend's URLs).
    secrets: Secrets
    hidden: Secrets
    tape: Tape | None  # the cassette the run records to or replays from
    baseline: dict[str, Any] | None  # the results file it is compared with
    compared_with: dict[str, Any] | None  # what its results say of that baseline
    plan: str  # the console's first line, masked
    today: str  # the day the run started (UTC, YYYY-MM-DD): whether each task's quarantine holds, decided once
    served: Served | None = None  # the tool server of an agent that runs its own tools, when the harness plays some
    proxy: ModelProxy | None = None  # the model proxy of an agent whose model calls the run proxies (EVAL_MODEL_PROXY)


@record(kw_only=True)
class Sent:
    """What sending a run's trials left: how they ended, each task's entry (on disk), what the verdict needs."""

    manifest: dict[str, Any]  # what the run measured, with the provider's rate limits when it told them
    started_at: float  # time.time() when the first trial was sent
    started: float  # time.perf_counter() then
    ending: Ending
    entries: Spool
    tallies: Tallies
    briefs: list[dict[str, Any]]  # each task's entry with its trials' cost and calls only: what a comparison needs
    first: dict[str, Any] | None  # the first task's entry: says why, when nothing reached the agent
    not_run: list[str]
    handed: int  # the trials handed on
    jobs: int  # the trials there were to send
    concurrency: int


def send(run: Run) -> Sent:
    """Send every trial, a bounded number at a time; each task's entry, as it completes, to the console and to disk."""
    config, tasks, backend, tape = run.config, run.tasks, run.backend, run.tape
    secrets, hidden = run.secrets, run.hidden
    # The secrets alone: the task ids it lists stay the ids a baseline knows, whatever the query values.
    measured = run_manifest(config, run.task_file, run.selected, run.backend_name, run.settings, run.surface.system)
    manifest = secrets.mask_json(measured)
    if tape is not None:
        manifest.update(tape.manifest())
    # What is loaded now stays until the end: the collector need not walk the tasks again each time it runs, nor
    # at the exit (left frozen, the interpreter's teardown takes 6 ms less of a 55 ms stub run).
    gc.freeze()
    started_at = time.time()
    started = time.perf_counter()
    say(run.plan)
    jobs = [task for task in tasks for _ in range(config.runs)]
    # An agent inside this process (the stub) has nothing to wait for: threads would only add their own cost.
    concurrency = 1 if getattr(backend, "IN_PROCESS", False) else config.concurrency
    # A backend that posts through a Transport has its pacer: at most `concurrency` requests at a time, fewer when the
    # provider's rate limits say.
    pacer: Pacer | None = getattr(getattr(backend, "transport", None), "pacer", None)
    if pacer is not None:
        pacer.open(concurrency)
    console = Console(tasks, Progress(len(jobs), sys.stderr, pacer.state if pacer else None, config.auto is not None))
    # Each task's entry goes to disk as it completes; what stays in memory is what the verdict and compare need.
    entries = Spool(config.outputs.results)
    tallies = Tallies()
    briefs: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    comparing, masking = run.baseline is not None, bool(hidden)  # asked once, not with every task
    auto = config.auto is not None
    if comparing:
        from harness.costs import task_cost  # what a comparison weighs: a run without one, nothing
        from harness.drift import trial_calls

    def on_task(task: Task, trials: Sequence[Result]) -> None:
        nonlocal first
        entry = task_entry(task, trials, run.today)
        if auto:
            entry["adaptive"] = stopped_because(test, [trial.outcome.status for trial in trials])
        if masking:  # what the task says may hold what its placeholders expanded; the trials are masked already
            entry.update(hidden.mask_json({key: entry[key] for key in TASK_TEXT}), id=secrets.mask(entry["id"]))
            if task.quarantine is not None:  # its reason is the author's words, which may quote what the task forbids
                entry["quarantine"] = hidden.mask_json(entry["quarantine"])
        console.task(entry)
        entries.add(entry)
        if first is None:
            first = entry
        tallies.add(entry)
        if comparing:  # what the comparison needs of the trials: their cost, calls (for the drift) and statuses
            brief = {key: value for key, value in entry.items() if key != "trialResults"}
            calls = [trial_calls(trial) for trial in entry["trialResults"]]
            statuses = [trial["status"] for trial in entry["trialResults"]]  # what --runs auto's test reads, in order
            briefs.append(
                {**brief, "cost": task_cost(entry["trialResults"]), "trialCalls": calls, "trialStatuses": statuses}
            )

    if config.auto is None:
        in_task_order = InTaskOrder(tasks, config.runs, on_task)
    else:
        from harness.adaptive import sequential_test, stopped_because
        from harness.settling import InTaskOrderSettled, run_until_settled  # only a run of auto runs pays for them

        test = sequential_test(config.auto)
        in_task_order = InTaskOrderSettled(tasks, test, on_task)

    def on_result(result: Result) -> None:
        console.trial(result.outcome.status)
        in_task_order.add(result)

    tool_names = frozenset(tool.name for tool in run.task_file.tools)
    exchanges.install(tape)
    try:
        if config.auto is None:
            ending = run_jobs(backend, jobs, concurrency, on_result, secrets, hidden, tool_names, run.served, run.proxy)
        else:
            ending = run_until_settled(
                backend, tasks, test, concurrency, on_result, secrets, hidden, tool_names, run.served, run.proxy
            )
    finally:
        exchanges.install(None)
    if tape is not None and ending.stopped_by is not None:  # a replay answers what this run never sent so, not a miss
        tape.stopped_by = {"code": ending.stopped_by.error_code or "", "reason": ending.stopped_by.error or ""}
    # The trials are in: a late Ctrl-C must not leave them unwritten.
    for signum in (_signal.SIGINT, *STOP_SIGNALS):
        _signal.signal(signum, _signal.SIG_IGN)
    HandingOn.now = False
    not_run = in_task_order.finish()
    if masking:  # named as an entry would be: by its masked id
        not_run = [secrets.mask(task_id) for task_id in not_run]
    console.finish()
    pacing = pacer.state() if pacer is not None else None
    if pacing is not None and pacing.told:  # a replay, or an endpoint that never spoke of its limits, has none to say
        manifest["rateLimits"] = pacing.recorded()
    return Sent(
        manifest=manifest,
        started_at=started_at,
        started=started,
        ending=ending,
        entries=entries,
        tallies=tallies,
        briefs=briefs,
        first=first,
        not_run=not_run,
        handed=in_task_order.count,
        jobs=len(jobs),
        concurrency=concurrency,
    )


def judge(run: Run, sent: Sent) -> tuple[Summary, Comparison | None]:
    """The run against its baseline, when it has one; then the verdict, which nothing after it decides again."""
    config, stop = run.config, sent.ending.cut
    comparison = None
    if run.baseline is not None:
        from harness.comparison import compare

        comparison = compare(
            run.baseline,
            {"manifest": sent.manifest, "runs": config.runs, "results": sent.briefs, "notRun": sent.not_run},
            config.growth_limits,
        )
    summary = decide(
        sent.tallies,
        config.gate,
        runs=config.runs,
        gate_on=config.gate_on,
        not_run=len(sent.not_run),
        regressed=[*comparison.regressed, *comparison.quarantined_regressed] if comparison else (),
        overall_regressed=comparison.overall_regressed if comparison else False,
        growth=comparison.growth if comparison else (),
        interrupted=isinstance(stop, KeyboardInterrupt),
        rate_limited=sent.ending.rate_limited,
        internal_error=run.hidden.mask(internal_error(stop)) if isinstance(stop, Exception) else None,
        adaptive=config.auto.written() if config.auto is not None else None,
    )
    return summary, comparison


def write(run: Run, sent: Sent, summary: Summary, comparison: Comparison | None) -> None:
    """Write the results file and every report asked for, all together; then the cassette."""
    config = run.config
    document = results_document(
        run_id=config.run_id,
        fingerprint=fingerprint(sent.manifest, run.selected),
        manifest=sent.manifest,
        started_at=utc_timestamp(sent.started_at),
        duration_ms=(time.perf_counter() - sent.started) * 1000,
        summary=summary,
        tasks=sent.entries,
        interrupted=isinstance(sent.ending.cut, KeyboardInterrupt),
        not_run=sent.not_run,
        baseline=run.compared_with,
    )
    try:
        publish(document, summary, config.outputs, comparison)
    finally:
        sent.entries.close()
        if run.tape is not None:
            run.tape.save()  # what was recorded, also of a run cut short: after the results, which it must not cost


def report(run: Run, sent: Sent, summary: Summary, comparison: Comparison | None) -> int:
    """Say the headline and the comparison, and why the run stopped early; return the exit code, or raise what the
    boundary turns into one (a bug that cut the run short, an agent nobody reached)."""
    config, stop = run.config, sent.ending.cut
    say(headline(summary))
    if comparison is not None:
        from harness.comparison import render

        for line in render(comparison, config.baseline_path or "", config.outputs.results):
            say(line)
    if isinstance(stop, Exception):
        raise stop  # recorded in the results; the boundary says it and exits 4
    if summary.exit_code == EXIT_UNREACHABLE:
        assert sent.first is not None  # a verdict of unreachable counts at least one task
        only_replayed = config.replay_path is not None and not config.record_missing
        replayed_from = f" (as recorded in {config.replay_path}, replayed: nothing was sent)" if only_replayed else ""
        raise Unreachable(unreachable_reason(sent.manifest, sent.first) + replayed_from)
    planned = count(sent.jobs, "trial") if config.auto is None else f"at most {count(sent.jobs, 'trial')}"
    if summary.exit_code == EXIT_INTERRUPTED:
        complain(f"eval_agent: interrupted after {sent.handed} of {planned}")
    elif sent.ending.rate_limited:
        complain(
            f"eval_agent: stopped after {sent.handed} of {planned}: "
            f"{count(sent.ending.wave, 'request')} in a row ended rate-limited (reply:rate-limited), "
            "the rest were not sent"
        )
    return summary.exit_code
