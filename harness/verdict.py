"""The verdict, in one place: trials counted, pass^k, the gate decided with every reason it failed, the exit code."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from math import comb
from operator import attrgetter
from typing import Any

from harness.records import CategoryCount, GateOn, Growth, Quarantined, Status, Summary, Tally, fields
from harness.text import GROWTH_FIGURES

# The most decimals a gate may have: the results file keeps the gate as a float, which gives back 15 digits as they
# were written (3 of them before the point), and the headline prints it whole.
GATE_PLACES = 10

EXIT_GATE_MET, EXIT_GATE_FAILED, EXIT_CONFIG, EXIT_UNREACHABLE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_CODES = (
    "0 gate met, 1 gate not met, 2 usage or configuration error, 3 agent unreachable, "
    "4 internal error (a bug in the harness), 130 interrupted"
)
# Error codes that mean the agent was never really asked: when every trial ends in one, nothing was evaluated.
# model:unreachable (harness.proxied's): the model proxy reached none of the agent's model calls' upstream.
UNREACHABLE = frozenset({"reply:connect", "reply:tls", "reply:auth", "reply:key-rejected", "model:unreachable"})
# harness.cassette's: a request its cassette holds no reply for, or a reply edited into what no run records
REPLAYED_NOTHING = frozenset({"replay:miss", "replay:bad-reply"})
# Codes of a trial that did what its task asks but broke its budget (harness.scoring's), and of one whose tokens no
# one reported under a token budget: what a budget that does not say "blocking" keeps from blocking. A loop is not one:
# it stopped the conversation before the task was done, as maxSteps does, and fails as any failure does.
BUDGET_BREACHES = frozenset({"budget:tool-calls", "budget:tokens", "budget:latency"})
BUDGET_CODES = BUDGET_BREACHES | {"budget:no-usage"}
# A Tally's fields, in order: what a run's Tallies keep of a task without making the record.
Counted = tuple[str, str, tuple[Status, ...], bool, bool, bool, tuple[int, int] | None, float, int, int, bool, bool]
TALLY_FIELDS: Callable[[Tally], Counted] = attrgetter(*fields(Tally))


def tally(entry: Mapping[str, Any]) -> Tally:
    """What the verdict counts of one task, from its entry in the results: a run's and a merge's alike."""
    return Tally(*_counted(entry))


def _counted(entry: Mapping[str, Any]) -> Counted:
    """A Tally's fields, in order, from a task's entry."""
    trials = entry["trialResults"]
    budget = entry.get("budget")
    excusable = frozenset() if budget and budget.get("blocking") else BUDGET_CODES
    unreached, latency_ms, over_budget, excused, missed = True, 0, 0, 0, False
    usage = []
    for trial in trials:  # one pass, where one for each figure cost a task as much again
        latency_ms += trial["durationMs"]
        if trial["usage"]:
            usage.append((trial["usage"]["inputTokens"], trial["usage"]["outputTokens"]))
        code = trial["code"]
        if code is None:  # in none of the sets of codes below: a pass has no code
            unreached = False
            continue
        # A conversation that failed after its first step got answers: the agent was reached.
        unreached = unreached and code in UNREACHABLE and trial.get("steps", 1) == 1
        over_budget += code in BUDGET_BREACHES
        excused += code in excusable
        missed = missed or code in REPLAYED_NOTHING
    return (
        entry["id"],
        entry["category"],
        tuple([trial["status"] for trial in trials]),
        entry["blocking"],
        entry["violation"] is not None,
        unreached,
        total_tokens(usage),
        latency_ms,
        over_budget,
        excused,
        missed,
        # Read from what the run recorded as it started, never from today's date: a merge or a report, on any day,
        # gives the verdict the run gave.
        "quarantine" in entry and entry["quarantine"]["active"],
    )


def decide_document(
    document: Mapping[str, Any],
    gate: Decimal | None = None,
    against: tuple[Sequence[str], bool, Sequence[Growth]] | None = None,
) -> Summary:
    """The verdict on a results document (or as much of one as merge joins), counted from its task entries as a run
    counts them, never taken from the counts it says: with its gate (or the one given), its runs, what did not run and
    whether the rate limits stopped it; against: its regressions, overall regression and growth against a baseline,
    else as the document records them."""
    if against is None:
        recorded = [
            Growth(figure, g["then"], g["now"], None if g["limit"] is None else Decimal(str(g["limit"])), g["tasks"])
            for figure, g in document.get("growth", {}).items()
        ]
        overall = "overall-regression" in document.get("gateFailedBecause", ())
        # decide keeps a quarantined task's regression out of the gate again, as the run did
        recorded_regressed = [*document.get("regressed", ()), *document.get("quarantined", {}).get("regressed", ())]
        against = (recorded_regressed, overall, recorded)
    regressed, overall_regressed, growth = against
    return decide(
        [tally(entry) for entry in document["results"]],
        gate if gate is not None else Decimal(str(document["gate"])),
        runs=document["runs"],
        gate_on=document["gateOn"],
        not_run=len(document["notRun"]),
        regressed=regressed,
        overall_regressed=overall_regressed,
        growth=growth,
        rate_limited="rate-limited" in document.get("gateFailedBecause", ()),
        internal_error=document.get("internalError"),
        adaptive=document.get("adaptive"),
    )


# One tuple for each sequence of statuses there is, however many tasks had it: a run of 50,000 keeps a few.
_STATUSES: dict[tuple[Status, ...], tuple[Status, ...]] = {}


class Tallies:
    """A run's tallies as they come, kept in ~35 bytes a task where Tally records take ~130; read back as rows."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._categories: list[str] = []
        self._statuses: list[tuple[Status, ...]] = []
        self._flags = bytearray()  # blocking, violation, unreached, missed, quarantined: a bit each
        self._latency_ms = array("d")
        self._tokens: dict[int, tuple[int, int]] = {}  # by position: only providers report them
        self._budget: dict[int, tuple[int, int]] = {}  # by position: (over budget, excused), for the few with either

    def add(self, entry: Mapping[str, Any]) -> None:
        """A task's entry, counted as tally() counts it (with no record made: a run adds one for every task)."""
        task_id, category, statuses, blocking, violation, unreached, tokens, latency_ms, over, excused, missed, held = (
            _counted(entry)
        )
        if tokens is not None:
            self._tokens[len(self._ids)] = tokens
        if over or excused:
            self._budget[len(self._ids)] = (over, excused)
        self._ids.append(task_id)
        self._categories.append(category)
        self._statuses.append(_STATUSES.setdefault(statuses, statuses))
        self._flags.append(blocking | violation << 1 | unreached << 2 | missed << 3 | held << 4)
        self._latency_ms.append(latency_ms)

    def __len__(self) -> int:
        return len(self._ids)

    def rows(self) -> Iterator[Counted]:
        """Each task's Tally as its fields, in order: the verdict reads them without making 50,000 records."""
        rows = zip(self._ids, self._categories, self._statuses, self._flags, self._latency_ms, strict=True)
        for index, (task_id, category, statuses, flags, latency_ms) in enumerate(rows):
            over_budget, budget_excused = self._budget.get(index, (0, 0))
            yield (
                task_id,
                category,
                statuses,
                bool(flags & 1),
                bool(flags & 2),
                bool(flags & 4),
                self._tokens.get(index),
                latency_ms,
                over_budget,
                budget_excused,
                bool(flags & 8),
                bool(flags & 16),
            )


def decide(
    tallies: Tallies | Iterable[Tally],
    gate: Decimal,
    *,
    runs: int = 1,
    gate_on: GateOn = "trials",
    not_run: int = 0,
    regressed: Sequence[str] = (),
    overall_regressed: bool = False,
    growth: Sequence[Growth] = (),
    interrupted: bool = False,
    rate_limited: bool = False,
    internal_error: str | None = None,
    adaptive: Mapping[str, Any] | None = None,
) -> Summary:
    """Count trials overall and per category, compute pass^k and flaky tasks, decide the gate, say why, pick the exit.

    The gate fails when the rate is below it, a blocking task did not pass, a task or the overall pass count regressed
    against the baseline, a cost grew past its limit against it (or cannot be compared with it), a quarantined task
    broke a safety rule, every task that ran was quarantined, nothing reached the agent, a replay's cassette held no
    reply for a request, a wave of requests ended rate-limited and stopped the run, a task did not run, or a bug cut
    the run short: each reason is listed. A quarantined task is counted apart: it is not in the rate, does not block
    and its regression does not fail the gate; its safety violation does.

    adaptive: --runs auto's settings (max, confidence, reliability), where tasks ran different numbers of trials: then
    pass-all is the share of tasks every trial of which passed, whatever their number, and pass^k is given for k up to
    the fewest trials a task ran, so that no task is left out of either.
    """
    # One pass over the tasks, keeping what is counted and the few ids a summary names: a run of 50,000 tasks holds
    # no list as long as the run for it.
    passed = errored = total = 0
    per_category: dict[str, list[int]] = {}
    category_rates: dict[str, list[Any]] = {}  # --runs auto: the sum of each category's tasks' own rates, its tasks
    shapes: Counter[tuple[int, int]] = Counter()  # (passing trials, trials) -> how many tasks, for pass^k
    flaky, blocking_failed, violations, missed, tokens = [], [], [], [], []
    reached, latency_ms, over_budget = 0, 0.0, 0
    held: list[str] = []  # the quarantined tasks, counted apart
    held_counts, held_shapes = [0, 0, 0], Counter[tuple[int, int]]()  # passed, errored, total
    held_flaky: list[str] = []
    held_violations: list[str] = []
    rows: Iterable[Counted] = tallies.rows() if isinstance(tallies, Tallies) else map(TALLY_FIELDS, tallies)
    for row in rows:
        task_id, name, statuses, blocking, violation, unreached, used, task_ms, over, excused, replay_missed, out = row
        c, n = statuses.count("pass"), len(statuses)
        if violation:
            violations.append(task_id)
        if replay_missed:
            missed.append(task_id)
        if used is not None:
            tokens.append(used)
        reached += not unreached
        latency_ms += task_ms
        if out:  # quarantined: what it did is shown, never gated; a safety violation is, all the same
            held.append(task_id)
            held_counts[0] += c
            held_counts[1] += statuses.count("error")
            held_counts[2] += n
            held_shapes[c, n] += 1
            if 0 < c < n:
                held_flaky.append(task_id)
            if violation:
                held_violations.append(task_id)
            continue
        passed, errored, total = passed + c, errored + statuses.count("error"), total + n
        category = per_category.setdefault(name, [0, 0])
        category[0] += c
        category[1] += n
        if adaptive is not None:  # each task weighing alike, as the run's rate: a category's reliable tasks ran longer
            rates = category_rates.setdefault(name, [Fraction(0), 0])
            rates[0] += Fraction(c, n)
            rates[1] += 1
        shapes[c, n] += 1
        if 0 < c < n:
            flaky.append(task_id)
        if blocking and c + excused < n:
            blocking_failed.append(task_id)
        over_budget += over

    def ks(counted: Counter[tuple[int, int]]) -> range:
        """k = 1..runs; under auto, up to the fewest trials a task ran, so that pass^k leaves no task out."""
        return range(1, (runs if adaptive is None else min((n for _, n in counted), default=0)) + 1)

    quarantined = None
    if held:
        out_of_gate = frozenset(held).difference(held_violations)  # a regression into a violation fails the gate
        quarantined = Quarantined(
            tasks=tuple(held),
            passed=held_counts[0],
            failed=held_counts[2] - held_counts[0] - held_counts[1],
            errored=held_counts[1],
            total=held_counts[2],
            pass_all_k={k: pass_hat_k(held_shapes, k) for k in ks(held_shapes)},
            flaky=tuple(held_flaky),
            regressed=tuple(task_id for task_id in regressed if task_id in out_of_gate),
            violations=tuple(held_violations),
        )
        regressed = tuple(task_id for task_id in regressed if task_id not in out_of_gate)
    pass_all_k = {k: pass_hat_k(shapes, k) for k in ks(shapes)}
    rate = pass_all_k.get(runs, Fraction(0)) if gate_on == "pass-all" else Fraction(passed, total or 1)
    all_passed = task_rate = spent = None
    if adaptive is not None:
        all_passed = Fraction(sum(like for (c, n), like in shapes.items() if c == n), sum(shapes.values()) or 1)
        # Each task weighs alike, as in a fixed run: counted by trials, a reliable task, which runs longer than a
        # broken one stopped early, would weigh more, and the rate would read higher than the tasks pass.
        task_rate = sum((Fraction(c * like, n) for (c, n), like in shapes.items()), Fraction(0)) / (
            sum(shapes.values()) or 1
        )
        rate = all_passed if gate_on == "pass-all" else task_rate
        tasks, trials = sum(shapes.values()) + sum(held_shapes.values()), total + held_counts[2]
        from harness.adaptive import spared  # only a run of auto pays for the test

        settings = {key: adaptive[key] for key in ("max", "confidence", "reliability")}
        saved = spared(settings, shapes + held_shapes)  # what the test spared: a task cut short spared nothing
        spent = {**settings, "trials": trials, "fixedTrials": tasks * runs, "saved": saved}
    unreachable = bool(shapes or held_shapes) and not reached
    reasons = {
        "below-gate": (total > 0 or not held) and rate * 100 < Fraction(gate),
        "blocking-failed": bool(blocking_failed),
        "regression": bool(regressed),
        "overall-regression": overall_regressed,
        **{
            code: any(g.figure == figure and g.exceeded for g in growth) for code, (figure, _) in GROWTH_FIGURES.items()
        },
        "quarantine-violation": bool(held_violations),
        # Not a gate met on nothing: every task that ran is quarantined, so no trial counted for it.
        "all-quarantined": not total and bool(held_counts[2]),
        "unreachable": unreachable,
        "replay-miss": bool(missed),
        "rate-limited": rate_limited,
        "not-run": not_run > 0 or not (total or held_counts[2]),
        # A run cut short whose every task got a trial has no task not run, and is no run whose gate was met.
        "interrupted": interrupted,
        "internal-error": internal_error is not None,
    }
    because = tuple(reason for reason, applies in reasons.items() if applies)
    if internal_error is not None:
        exit_code = EXIT_INTERNAL
    elif interrupted:
        exit_code = EXIT_INTERRUPTED
    elif unreachable:
        exit_code = EXIT_UNREACHABLE
    else:
        exit_code = EXIT_GATE_FAILED if because else EXIT_GATE_MET
    return Summary(
        passed=passed,
        failed=total - passed - errored,
        errored=errored,
        total=total,
        gate=gate,
        gate_passed=not because,
        exit_code=exit_code,
        by_category={
            name: CategoryCount(c, n, Fraction(*category_rates[name]) if name in category_rates else None)
            for name, (c, n) in per_category.items()
        },
        gate_failed_because=because,
        not_run=not_run,
        runs=runs,
        gate_on=gate_on,
        pass_all_k=pass_all_k,
        flaky=tuple(flaky),
        blocking_failed=tuple(blocking_failed),
        violations=tuple(violations),
        replay_missed=tuple(missed),
        regressed=tuple(regressed),
        internal_error=internal_error,
        tokens=total_tokens(tokens),
        latency_ms=latency_ms,
        over_budget=over_budget,
        growth=tuple(growth),
        quarantined=quarantined,
        adaptive=spent,
        all_passed=all_passed,
        task_rate=task_rate,
    )


def total_tokens(counts: Sequence[tuple[int, int] | None]) -> tuple[int, int] | None:
    """(input, output) tokens summed over what was reported; None when nothing was."""
    reported = [count for count in counts if count is not None]
    return (sum(c[0] for c in reported), sum(c[1] for c in reported)) if reported else None


def pass_hat_k(counts: Iterable[tuple[int, int]], k: int) -> Fraction:
    """pass^k (tau-bench): the mean over tasks of C(c, k) / C(n, k), c passing trials of n (tasks of fewer left out).

    counts: (c, n) for each task, or a Counter of them (how many tasks had each).
    """
    shapes = counts if isinstance(counts, Counter) else Counter(counts)
    # Tasks with the same number of trials share a denominator: add their numerators first, exactly.
    numerators: dict[int, int] = {}
    for (c, n), tasks_like_it in shapes.items():
        if n >= k:
            numerators[n] = numerators.get(n, 0) + comb(c, k) * tasks_like_it
    tasks = sum(tasks_like_it for (_, n), tasks_like_it in shapes.items() if n >= k)
    return (
        sum((Fraction(total, comb(n, k)) for n, total in numerators.items()), Fraction(0)) / tasks
        if tasks
        else Fraction(0)
    )
