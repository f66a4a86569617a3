"""The comparison of two runs, task by task, category by category and overall: what changed, and whether a drop is
more than chance (Fisher's exact test). A run with --baseline, merge, compare and report all compare the same way."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from functools import cache
from math import comb
from typing import Any

from harness.costs import OVERALL_FIGURES, TASK_FIGURES, CostComparison, TaskCost, compare_costs, cost_of, growths
from harness.drift import Drift, drift, drift_document, drift_lines
from harness.records import Figure, Growth, change_percent, record, replace
from harness.results import as_float, growth_document, rounded_percent
from harness.text import count, growth_text, held_out, millis, percent

ALPHA = 0.05  # a difference in pass counts is a change when Fisher's exact test gives p below this
ORDER = (
    "regressed",
    "not run",
    "still failing",
    "changed definition",
    "new",
    "removed",
    "not selected",
    "fixed",
    "noise",
    "still passing",
)
# The changes of a task both runs measured with the same definition: what the overall test counts.
ALIKE = frozenset({"regressed", "still failing", "fixed", "noise", "still passing"})
COST_TASKS_LISTED = 50  # tasks whose cost a comparison's text lists one by one; --out and the HTML report have all
SETTINGS = [
    ("backend", ("backend",)),
    ("URL", ("backendSettings", "url")),
    ("model", ("backendSettings", "model")),
    ("task file", ("taskFile", "path")),
    ("task file SHA-256", ("taskFile", "sha256")),
    ("runs", ("runs",)),  # with --runs auto's settings, when a side ran so: see _runs
    ("harness version", ("harnessVersion",)),
]


@record
class TaskChange:
    """How one task moved between the baseline and the candidate."""

    id: str
    category: str
    change: str
    detail: str
    p_value: float | None = None
    failure_changed: bool = False
    quarantined: bool = False  # the candidate held it out of the gate: shown, and its regression fails nothing


@record
class Comparison:
    """Everything compare reports: changed settings, per-task changes, pass-rates then and now."""

    settings: list[tuple[str, Any, Any]]
    tasks: list[TaskChange]
    by_category: dict[str, tuple[Fraction | None, Fraction | None]]  # pass-rates in percent, then and now
    overall: tuple[Fraction | None, Fraction | None]
    overall_p: float | None  # over the tasks measured alike on both sides, with repeats on both
    overall_regressed: bool  # those tasks' pass count fell, significantly
    runs: tuple[int, int]  # then, now
    costs: CostComparison  # of the tasks measured alike on both sides
    growth: tuple[Growth, ...]  # each figure a growth limit applies to, with the limit given
    drift: Drift  # each tool's calls, keys and values, then and now, over the tasks both ran
    auto: tuple[bool, bool] = (False, False)  # whether each side ran with --runs auto: its tasks' trials differ

    @property
    def regressed(self) -> list[str]:
        """The tasks that regressed and count for the gate."""
        return [task.id for task in self.tasks if task.change == "regressed" and not task.quarantined]

    @property
    def quarantined_regressed(self) -> list[str]:
        """The tasks that regressed under quarantine: shown, never failing the gate."""
        return [task.id for task in self.tasks if task.change == "regressed" and task.quarantined]


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test on [[a, b], [c, d]]: the chance of tables at most as likely as this."""
    row1, row2, col1 = a + b, c + d, a + c
    # Each table's probability is comb(row1, x) * comb(row2, col1 - x) over one common denominator: compare numerators.
    weights = {x: comb(row1, x) * comb(row2, col1 - x) for x in range(max(0, col1 - row2), min(row1, col1) + 1)}
    observed = weights[a]
    return float(Fraction(sum(w for w in weights.values() if w <= observed), comb(row1 + row2, col1)))


@cache
def significant_drop(runs_then: int, runs_now: int) -> int | None:
    """The fewest trials of runs_now that a task passing all runs_then trials then must fail now for Fisher's test to
    call the drop significant; None when no drop can be, at these sizes."""
    return next((k for k in range(1, runs_now + 1) if fisher_exact(runs_then, 0, runs_now - k, k) < ALPHA), None)


def significance_rule(runs_then: int, runs_now: int) -> str:
    """What a task's drop must be to count as a regression at these numbers of runs, said for a person."""
    sizes = (
        f"{count(runs_then, 'run')} a side"
        if runs_then == runs_now
        else f"{count(runs_then, 'run')} then and {runs_now} now"
    )
    drop = significant_drop(runs_then, runs_now)
    if drop is None:
        p = fisher_exact(runs_then, 0, 0, runs_now)
        return (
            f"significance: at {sizes} no drop is ({runs_then}/{runs_then} → 0/{runs_now}: p={p:.2g}), so a task that"
            " passed every trial then and not every trial now regressed, as at one run"
        )
    lowest = f"{runs_now - drop}/{runs_now}" + (" or lower" if drop < runs_now else "")
    return (
        f"significance: at {sizes}, a drop from {runs_then}/{runs_then} to {lowest} is significant (Fisher's exact"
        f" test, p < {ALPHA})"
    )


def classify(
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    not_run_in: str | None = None,
    not_selected_in: str | None = None,
    settled: tuple[str | None, str | None] = (None, None),
) -> TaskChange:
    """One task's change, from its entries in the baseline and the candidate (either may be absent: `not_run_in` says
    which run was cut short before it, `not_selected_in` which run left it out of its selection); settled: what
    --runs auto's test settled it as then and now (reliable, unreliable or None), when a side ran so."""
    entry = after or before
    assert entry is not None
    task_id, category = entry["id"], entry["category"]
    if not_run_in is not None:
        return TaskChange(task_id, category, "not run", f"did not run in the {not_run_in} (was {_brief(entry)})")
    if not_selected_in is not None:
        return TaskChange(task_id, category, "not selected", f"not selected in the {not_selected_in}")
    if before is None:
        return TaskChange(task_id, category, "new", _verdict(entry))
    if after is None:
        return TaskChange(task_id, category, "removed", f"was {_verdict(before)}")
    was, now = before["status"] == "pass", after["status"] == "pass"
    if before["sha256"] != after["sha256"]:
        return TaskChange(
            task_id,
            category,
            "changed definition",
            f"{_brief(before)} → {_brief(after)}; its definition changed, so this is not the agent's doing",
        )
    failure_changed = not was and not now and before["code"] != after["code"]
    if settled in (("reliable", "unreliable"), ("unreliable", "reliable")):
        # --runs auto's test settled it on each side (a fixed side's trials read in order), each verdict wrong at most
        # 1 - confidence of the time: a flip is a change, where Fisher's test on the few trials they stopped at could
        # not tell (6/6 → 3/6: p=0.18).
        counts = f"{before['passes']}/{before['trials']} → {after['passes']}/{after['trials']}"
        detail = f"{counts} (settled {settled[0]}, now {settled[1]}) {_why(after)}".rstrip()
        return TaskChange(task_id, category, "regressed" if settled[0] == "reliable" else "fixed", detail)
    if before["trials"] > 1 or after["trials"] > 1:
        b, a = before["passes"], after["passes"]
        if significant_drop(before["trials"], after["trials"]) is None:
            # No table at these sizes is significant: judged as at one run, on whether every trial passed.
            counts = f"{b}/{before['trials']} → {a}/{after['trials']} (too few runs for a test)"
            if was != now:
                return TaskChange(
                    task_id, category, "regressed" if was else "fixed", f"{counts} {_why(after)}".rstrip()
                )
            if was:
                return TaskChange(task_id, category, "still passing", counts)
            shift = _failure_shift(before, after)
            return TaskChange(task_id, category, "still failing", f"{counts} {shift}", failure_changed=failure_changed)
        p = fisher_exact(b, before["trials"] - b, a, after["trials"] - a)
        counts = f"{b}/{before['trials']} → {a}/{after['trials']} (p={p:.2g})"
        rate_before, rate_after = Fraction(b, before["trials"]), Fraction(a, after["trials"])
        if rate_after != rate_before:
            if p >= ALPHA:
                return TaskChange(task_id, category, "noise", f"{counts}, within chance", p)
            change = "regressed" if rate_after < rate_before else "fixed"
            return TaskChange(task_id, category, change, f"{counts} {_why(after)}".rstrip(), p)
        if was:
            return TaskChange(task_id, category, "still passing", counts, p)
        return TaskChange(
            task_id, category, "still failing", f"{counts} {_failure_shift(before, after)}", p, failure_changed
        )
    if was and now:
        return TaskChange(task_id, category, "still passing", "pass")
    if was:
        return TaskChange(task_id, category, "regressed", f"pass → {after['status']} {_why(after)}")
    if now:
        return TaskChange(task_id, category, "fixed", f"{_brief(before)} → pass")
    return TaskChange(
        task_id, category, "still failing", _failure_shift(before, after), failure_changed=failure_changed
    )


def recorded_limits(document: Mapping[str, Any]) -> dict[str, Decimal]:
    """The growth limits a results file's run was gated with, by figure: what merge and report compare against."""
    growth = document.get("growth", {})
    return {figure: Decimal(str(g["limit"])) for figure, g in growth.items() if g["limit"] is not None}


def compare(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any], limits: Mapping[str, Decimal] | None = None
) -> Comparison:
    """Compare two runs task by task, category by category and overall, and what the tasks measured alike cost, with
    the growth limits given (tokens, toolCalls, latencyMs -> percent).

    Each is a results document, or as much of one as a run has before its verdict: its manifest, runs and entries.
    """
    before = {entry["id"]: entry for entry in baseline["results"]}
    after = {entry["id"]: entry for entry in candidate["results"]}
    ids = list(after) + [task_id for task_id in before if task_id not in after]
    not_run = {task_id: "baseline" for task_id in baseline.get("notRun", ())}
    not_run |= {task_id: "candidate" for task_id in candidate.get("notRun", ())}
    # A task one run's task file has but that run did not select is not measured there, neither new nor removed.
    not_selected = {task_id: "baseline" for task_id in after if task_id not in before and _has(baseline, task_id)}
    not_selected |= {task_id: "candidate" for task_id in before if task_id not in after and _has(candidate, task_id)}
    # A side run with --runs auto weighs each task alike: its reliable tasks ran longer than its broken ones.
    auto = ("adaptive" in baseline["manifest"], "adaptive" in candidate["manifest"])
    settled = _settled(baseline, candidate, auto)
    tasks = [
        classify(
            before.get(task_id),
            after.get(task_id),
            not_run.get(task_id),
            not_selected.get(task_id),
            (settled[0].get(task_id), settled[1].get(task_id)),
        )
        for task_id in ids
    ]
    # A quarantine never hides a safety violation: a task that regressed into one is a regression as any other.
    held = {task_id for task_id, entry in after.items() if held_out(entry)}
    if held:  # as the candidate held them, on the day it ran
        tasks = [replace(task, quarantined=True) if task.id in held else task for task in tasks]
    tasks.sort(key=lambda task: ORDER.index(task.change))
    then = _counts((entry for entry in baseline["results"] if entry["id"] not in not_selected), auto[0])
    now = _counts((entry for entry in candidate["results"] if entry["id"] not in not_selected), auto[1])
    categories = list(now) + [category for category in then if category not in now]
    by_category = {category: (_rate(then.get(category)), _rate(now.get(category))) for category in categories}
    (passed_then, total_then), (passed_now, total_now) = _overall(then), _overall(now)
    overall_p, overall_regressed = None, False
    if baseline["runs"] > 1 and candidate["runs"] > 1:
        alike = {task.id for task in tasks if task.change in ALIKE and not task.quarantined}
        if any(auto):  # pooled trials would weigh a task by how long its test ran: the tasks' own rates, paired
            overall_p, overall_regressed = _sign_test(
                [(_task_rate(before[task_id]), _task_rate(after[task_id])) for task_id in after if task_id in alike]
            )
        else:
            (b, nb), (a, na) = (
                _overall(_counts((e for e in entries if e["id"] in alike), False))
                for entries in (before.values(), after.values())
            )
            overall_p = fisher_exact(int(b), int(nb - b), int(a), int(na - a))
            overall_regressed = overall_p < ALPHA and a * nb < b * na
    costs = compare_costs(_costs(tasks, before, after), by_task=any(auto))
    settings = []
    for label, path in SETTINGS:
        setting_then, setting_now = _lookup(baseline["manifest"], path), _lookup(candidate["manifest"], path)
        if label == "runs":
            setting_then, setting_now = _runs(baseline["manifest"]), _runs(candidate["manifest"])
        if setting_then != setting_now:
            settings.append((label, setting_then, setting_now))
    return Comparison(
        settings,
        tasks,
        by_category,
        (_rate((passed_then, total_then)), _rate((passed_now, total_now))),
        overall_p,
        overall_regressed,
        (baseline["runs"], candidate["runs"]),
        costs,
        growths(costs, limits or {}),
        drift(baseline, candidate),
        auto,
    )


def _settled(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any], auto: tuple[bool, bool]
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """What --runs auto's test settled each task as, then and now: an auto side's verdicts as it stopped them; a fixed
    side's, where the other ran auto, that side's test's on its trials read in order (what auto would have settled
    them as: the trials are alike however many follow); none where neither side ran auto."""
    if not any(auto):
        return {}, {}
    from harness.adaptive import Auto, sequential_test, settled_by  # only a comparison with an auto side needs it

    test = sequential_test(Auto.read((baseline if auto[0] else candidate)["manifest"]["adaptive"]))

    def verdicts(document: Mapping[str, Any], ran_auto: bool) -> dict[str, str | None]:
        if ran_auto:
            return {entry["id"]: entry.get("adaptive", {}).get("stoppedBecause") for entry in document["results"]}
        return {entry["id"]: settled_by(test, _statuses(entry)) for entry in document["results"]}

    return verdicts(baseline, auto[0]), verdicts(candidate, auto[1])


def _statuses(entry: Mapping[str, Any]) -> list[str]:
    """A task's trials' statuses in order: from its trials, or what a run's brief of it kept (`trialStatuses`)."""
    if "trialResults" in entry:
        return [trial["status"] for trial in entry["trialResults"]]
    return list(entry.get("trialStatuses", ()))


def _costs(
    tasks: Iterable[TaskChange], before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]
) -> Iterator[tuple[str, TaskCost, TaskCost]]:
    """Each task measured alike on both sides whose cost both sides recorded, with its cost then and now, in the
    candidate's order; a quarantined task's cost is not the gate's, so neither is its growth."""
    alike = {task.id for task in tasks if task.change in ALIKE and not task.quarantined}
    for task_id, entry in after.items():
        if task_id in alike:
            then, now = cost_of(before[task_id]), cost_of(entry)
            if then is not None and now is not None:
                yield task_id, then, now


def render(comparison: Comparison, baseline_name: str, candidate_name: str) -> list[str]:
    """For a person: the settings that differ, a line per changed task (regressions first), then the rates."""
    lines = [f"compare {baseline_name} → {candidate_name}"]
    for label, then, now in comparison.settings:
        lines.append(f"  setting changed: {label} {_show(then)} → {_show(now)}")
    counts = {change: sum(task.change == change for task in comparison.tasks) for change in ORDER}
    changed = [task for task in comparison.tasks if task.change not in ("still passing", "not selected")]
    width = max((len(task.id) for task in changed), default=0)
    for task in changed:
        held = " (quarantined: not gated)" if task.quarantined else ""
        lines.append(f"{task.change.upper():<18} {task.id:<{width}}  {task.detail}{held}")
    # Counted, not listed: a selection of 5 tasks of 50,000 would otherwise print 49,995 lines.
    for change in ("not selected", "still passing"):
        if counts[change]:
            lines.append(f"{change.upper():<18} {count(counts[change], 'task')}")
    lines += cost_lines(comparison)
    lines.append(f"{'category':<20} {'then':>6} {'now':>6}  change")
    for category, (then, now) in comparison.by_category.items():
        lines.append(f"{category:<20} {_pct(then):>6} {_pct(now):>6}  {_delta(then, now)}")
    then, now = comparison.overall
    significance = ""
    if comparison.overall_p is not None:
        alike = sum(task.change in ALIKE and not task.quarantined for task in comparison.tasks)
        aside = ", quarantined tasks aside" if any(task.quarantined for task in comparison.tasks) else ""
        basis = (
            ""
            if alike == len(comparison.tasks)
            else f" over the {count(alike, 'task')} in both with the same definition{aside}"
        )
        significance = f" (p={comparison.overall_p:.2g}{basis})"
    lines.append(f"{'overall':<20} {_pct(then):>6} {_pct(now):>6}  {_delta(then, now)}{significance}")
    if any(comparison.auto):
        lines.append(
            "significance: each task's drop weighed on the trials it ran (--runs auto stops a task's when its test"
            f" settles it), by Fisher's exact test, p < {ALPHA}, and a task the test settled reliable then and"
            " unreliable now (a fixed side's trials read in order) regressed; overall, a sign test over the tasks' own"
            " rates"
        )
    elif max(comparison.runs) > 1:
        lines.append(significance_rule(*comparison.runs))
    lines.append(" · ".join(f"{n} {change}" for change, n in counts.items() if n) or "no tasks")
    return lines + drift_lines(comparison.drift)


def cost_lines(comparison: Comparison) -> list[str]:
    """What the tasks measured alike cost then and now, overall and per task (the first COST_TASKS_LISTED), a growth
    limit beside its figure; nothing when no task's cost was recorded on both sides."""
    costs = comparison.costs
    if not costs.tasks:
        return []
    limits = {growth.figure: growth for growth in comparison.growth}
    basis = f"each task's mean per trial, summed over the {count(len(costs.tasks), 'task')} measured alike"
    lines = [f"{'cost':<20} {'then':>12} {'now':>12}  change ({basis})"]
    for key, label in OVERALL_FIGURES.items():
        then, now = costs.overall[key]
        change = overall_change(costs, key)
        growth = limits.get(key)
        if growth is not None and growth.limit is not None:
            change += f" (limit {percent(growth.limit, 10)}%{': exceeded' if growth.exceeded else ''})"
        lines.append(f"{label:<20} {cost_figure(key, then):>12} {cost_figure(key, now):>12}  {change}")
    for task_id, then_cost, now_cost in costs.tasks[:COST_TASKS_LISTED]:
        lines.append(f"  {task_id}: {task_cost_text(then_cost, now_cost)}")
    if len(costs.tasks) > COST_TASKS_LISTED:
        lines.append(f"  … and {count(len(costs.tasks) - COST_TASKS_LISTED, 'task')} more")
    return lines


def overall_change(costs: CostComparison, key: str) -> str:
    """An overall figure's change as reports show it, the tokens' saying over which tasks when not over all: none
    when no task recorded them in both runs, whose totals are then each run's own, of other tasks."""
    then, now = costs.overall[key]
    if key != "tokens" or costs.token_tasks == len(costs.tasks):
        return cost_change(then, now)
    if not costs.token_tasks:
        return "-" if then is None or now is None else "- (no task recorded them in both runs)"
    return f"{cost_change(then, now)} (over the {count(costs.token_tasks, 'task')} that recorded tokens in both)"


def task_cost_text(then: TaskCost, now: TaskCost) -> str:
    """`tokens 120 → 150 (+25%) · tool calls 1 → 1 · steps 1 → 1 · latency 12ms → 15ms (+25%)`; with
    repeats on either side, latency's median and p95; tokens when either side recorded them."""
    figures = task_figures(then, now)
    if then.tokens is None and now.tokens is None:
        figures = figures[1:]
    if len(then.latencies_ms) == len(now.latencies_ms) == 1:
        figures = [*figures[:-2], ("latency", "latencyMs", then.latency_ms, now.latency_ms)]
    return " · ".join(
        f"{label} {cost_figure(key, a)} → {cost_figure(key, b)}" + ("" if a == b else f" ({cost_change(a, b)})")
        for label, key, a, b in figures
    )


def task_figures(then: TaskCost, now: TaskCost) -> list[tuple[str, str, Figure | None, Figure | None]]:
    """A task's cost figures then and now, as reports list them: (what a person calls it, its key, then, now)."""
    return [
        ("tokens", "tokens", then.tokens, now.tokens),
        ("tool calls", "toolCalls", then.tool_calls, now.tool_calls),
        ("steps", "steps", then.steps, now.steps),
        ("latency median", "latencyMs", then.latency_median_ms, now.latency_median_ms),
        ("p95", "latencyMs", then.latency_p95_ms, now.latency_p95_ms),
    ]


def cost_figure(key: str, value: Figure | None) -> str:
    """A cost figure as reports show it: `not recorded`, `1234`, `1.5`, `12ms`."""
    if value is None:
        return "not recorded"
    if key.startswith("latency"):
        return millis(float(value))
    return f"{float(value):.1f}".removesuffix(".0")


def cost_change(then: Figure | None, now: Figure | None) -> str:
    """`+21.5%`, `no change`, `from 0`, `-`: a cost figure's change, as reports show it."""
    grew = change_percent(then, now)
    if grew is not None:
        return growth_text(grew)
    return "from 0" if then == 0 and now else "-"


def comparison_document(
    comparison: Comparison,
    baseline_path: str,
    candidate_path: str,
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
) -> dict[str, Any]:
    """What `compare --out` writes."""
    return {
        "baseline": {"path": baseline_path, "runId": baseline["runId"], "fingerprint": baseline["fingerprint"]},
        "candidate": {"path": candidate_path, "runId": candidate["runId"], "fingerprint": candidate["fingerprint"]},
        "settingsChanged": [{"setting": label, "then": then, "now": now} for label, then, now in comparison.settings],
        "regressed": comparison.regressed,
        "quarantinedRegressed": comparison.quarantined_regressed,
        "overall": {
            "then": _number(comparison.overall[0]),
            "now": _number(comparison.overall[1]),
            "pValue": comparison.overall_p,
            "regressed": comparison.overall_regressed,
        },
        "runs": {
            "then": comparison.runs[0],
            "now": comparison.runs[1],
            # with a side of --runs auto, each task's drop is weighed on its own trials: no one rule for them all
            "significantDrop": None if any(comparison.auto) else significant_drop(*comparison.runs),
        },
        "byCategory": {
            c: {"then": _number(then), "now": _number(now)} for c, (then, now) in comparison.by_category.items()
        },
        "cost": cost_document(comparison),
        "toolDrift": drift_document(comparison.drift),
        "tasks": [
            {
                "id": t.id,
                "category": t.category,
                "change": t.change,
                "detail": t.detail,
                "pValue": t.p_value,
                "failureChanged": t.failure_changed,
                "quarantined": t.quarantined,
            }
            for t in comparison.tasks
        ],
    }


def cost_document(comparison: Comparison) -> dict[str, Any]:
    """The cost of the tasks measured alike, then and now, overall and per task, as `compare --out` writes it."""
    costs = comparison.costs
    overall = {key: _figure(*costs.overall[key]) for key in OVERALL_FIGURES}
    if not costs.token_tasks:  # each run's own tokens, if any, of other tasks: no change between them
        overall["tokens"]["percent"] = None
    return {
        "tasks": len(costs.tasks),
        "tokenTasks": costs.token_tasks,
        "overall": overall,
        "growth": growth_document(comparison.growth),
        "byTask": [
            {
                "id": task_id,
                **{key: _figure(getattr(then, name), getattr(now, name)) for key, name in TASK_FIGURES.items()},
            }
            for task_id, then, now in costs.tasks
        ],
    }


def _figure(then: Figure | None, now: Figure | None) -> dict[str, Any]:
    return {"then": as_float(then), "now": as_float(now), "percent": rounded_percent(change_percent(then, now))}


def _verdict(entry: Mapping[str, Any]) -> str:
    return "pass" if entry["status"] == "pass" else f"{entry['status']} {entry['code']}: {entry['reason']}"


def _brief(entry: Mapping[str, Any]) -> str:
    return entry["status"] if entry["status"] == "pass" else f"{entry['status']} ({entry['code']})"


def _why(entry: Mapping[str, Any]) -> str:
    return "" if entry["status"] == "pass" else f"{entry['code']}: {entry['reason']}"


def _failure_shift(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    if before["code"] != after["code"]:
        return f"{before['code']} → {after['code']}: {after['reason']} (the failure changed)"
    return f"{after['code']}: {after['reason']}"


def _has(run: Mapping[str, Any], task_id: str) -> bool:
    """Whether the run's task file had the task: its manifest lists the file's ids when it selected fewer."""
    manifest = run["manifest"]
    ids = _lookup(manifest, ("taskFile", "taskIds"))
    return task_id in (ids if isinstance(ids, list) else manifest["selection"]["taskIds"])


def _counts(entries: Iterable[Mapping[str, Any]], by_task: bool) -> dict[str, tuple[Fraction, int]]:
    """(passed trials, trials) per category, in first-seen order; by_task (--runs auto): (the sum of the tasks' own
    pass rates, tasks), each task weighing alike."""
    counts: dict[str, tuple[Fraction, int]] = {}
    for entry in entries:
        passed, total = counts.get(entry["category"], (Fraction(0), 0))
        if not by_task:
            counts[entry["category"]] = (passed + entry["passes"], total + entry["trials"])
        elif entry["trials"]:
            counts[entry["category"]] = (passed + _task_rate(entry), total + 1)
    return counts


def _task_rate(entry: Mapping[str, Any]) -> Fraction:
    return Fraction(entry["passes"], entry["trials"]) if entry["trials"] else Fraction(0)


def _sign_test(rates: Sequence[tuple[Fraction, Fraction]]) -> tuple[float, bool]:
    """One-sided sign test over paired task rates (then, now): the chance of at least as many tasks falling as did,
    were a fall and a rise alike likely; and whether that chance is below ALPHA with more falls than rises."""
    falls, rises = sum(now < then for then, now in rates), sum(now > then for then, now in rates)
    moved = falls + rises
    if not moved:
        return 1.0, False
    p = float(Fraction(sum(comb(moved, k) for k in range(falls, moved + 1)), 2**moved))
    return p, p < ALPHA and falls > rises


def _overall(counts: Mapping[str, tuple[Fraction, int]]) -> tuple[Fraction, int]:
    return sum((passed for passed, _ in counts.values()), Fraction(0)), sum(total for _, total in counts.values())


def _rate(count: tuple[Fraction, int] | None) -> Fraction | None:
    return Fraction(100 * count[0], count[1]) if count and count[1] else None


def _number(rate: Fraction | None) -> float | None:
    return None if rate is None else float(rate)


def _pct(value: Fraction | None) -> str:
    return "-" if value is None else f"{percent(value, 1)}%"


def _delta(then: Fraction | None, now: Fraction | None) -> str:
    if then is None or now is None:
        return "new" if then is None else "removed"
    return "no change" if now == then else f"{float(now - then):+.1f} pts"


def _lookup(manifest: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = manifest
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _runs(manifest: Mapping[str, Any]) -> Any:
    """The runs a manifest says: N, or `auto:10 (95% confidence, 90% reliability)`."""
    auto = manifest.get("adaptive")
    if not isinstance(auto, Mapping):
        return manifest.get("runs")
    return f"auto:{auto['max']} ({auto['confidence']:g}% confidence, {auto['reliability']:g}% reliability)"


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text = str(value)
    return text[:12] + "…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text
