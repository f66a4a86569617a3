"""A Markdown section for a CI job summary (GITHUB_STEP_SUMMARY), rendered from a results document."""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.drift import drift_markdown
from harness.records import Outputs, Summary
from harness.results import explaining_trial
from harness.text import (
    budget_text,
    calls_text,
    clip,
    count,
    headline,
    percent,
    printable,
    quarantine_state,
    transcript,
    trials_saved,
)

if TYPE_CHECKING:
    from harness.comparison import Comparison

MISSES_LISTED = 100  # tasks that did not pass, listed one by one
# GitHub drops a step's whole summary past 1 MiB, and a step may append other sections of its own: stop at half.
SUMMARY_BYTES = 512 * 1024
NOTE_BYTES = 1024  # kept for the note that says what was cut
AGENT_TEXT_LIMIT = 1000  # characters of a reason or a task's calls, which an agent's reply can make any length
# What makes Markdown of text (links, images, emphasis, code, tables, headings, strikethrough); < > & go as entities.
MARKUP = re.compile(r"[\\`*_\[\]|#~]")


def render(document: Mapping[str, Any], summary: Summary, outputs: Outputs, comparison: Comparison | None) -> str:
    """The report as harness.reporters.REPORTS renders it: naming the HTML report and the results file."""
    html = next(iter(outputs.of("html")), None)
    return job_summary(document, summary, html, outputs.results, comparison)


def job_summary(
    document: Mapping[str, Any],
    summary: Summary,
    html_path: str | None = None,
    results_path: str = "",
    comparison: Comparison | None = None,
) -> str:
    """Headline, per-category table, the cost against a baseline, and every task that did not pass: its reason, what it
    expects, what was called; and the name of the HTML report, when there is one. Whole lines up to SUMMARY_BYTES, then
    a note of what was cut."""
    lines = [f"## Agent eval: {_text(headline(summary))}", ""]
    manifest = document["manifest"]
    url = manifest["backendSettings"].get("url")
    lines.append(
        f"Backend `{manifest['backend']}`{f' at `{url}`' if url else ''} · run `{document['runId']}`"
        f" · fingerprint `{document['fingerprint'][:12]}`"
    )
    if html_path:
        lines.append(
            f"\nThe whole run, task by task: {_code(os.path.basename(html_path))} (the HTML report, with the results)."
        )
    if summary.adaptive is not None and summary.all_passed is not None:
        auto = summary.adaptive
        pass_k = "".join(f", pass^{k} {percent(value * 100, 1)}%" for k, value in summary.pass_all_k.items())
        lines.append(
            f"\nTrials until settled (`--runs auto:{auto['max']}`, {auto['confidence']:g}% confidence, "
            f"{auto['reliability']:g}% reliability): {trials_saved(auto)}; every trial passed in "
            f"{percent(summary.all_passed * 100, 1)}% of tasks{pass_k}."
        )
        if summary.flaky:
            lines.append(f"Flaky: {_ids(summary.flaky)}.")
    elif summary.runs > 1:
        pass_k = ", ".join(f"pass^{k} {percent(value * 100, 1)}%" for k, value in summary.pass_all_k.items())
        lines.append(f"\n{summary.runs} trials per task: {pass_k}.")
        if summary.flaky:
            lines.append(f"Flaky: {_ids(summary.flaky)}.")
    if summary.blocking_failed:
        lines.append(
            f"\n**Blocking task failed**: {_ids(summary.blocking_failed)}; the gate fails whatever the pass-rate."
        )
    if summary.regressed:
        lines.append(
            f"\n**Regression** against the baseline: {_ids(summary.regressed)}; the gate fails whatever the pass-rate."
        )
    if summary.violations:
        what = "a forbidden tool called, or a secret or forbidden text in a reply"
        lines.append(f"\n**Safety violation** ({what}): {_ids(summary.violations)}.")
    if summary.quarantined:
        held = summary.quarantined
        lines.append(
            f"\n**{count(len(held.tasks), 'task')} quarantined** (run and shown, not gated): {_ids(held.tasks)};"
            f" {held.passed} of {count(held.total, 'trial')} passed. A safety violation on one fails the gate all the"
            " same."
        )
    if summary.over_budget:
        lines.append(
            f"\n**Over budget**: {summary.over_budget} of {count(summary.total, 'trial')} did what their task asks but"
            " broke its budget; they count against the pass-rate, and fail a blocking task's gate only"
            " when its budget says blocking."
        )
    if document["interrupted"] or document["notRun"]:
        lines.append(f"\n**Interrupted**: {count(len(document['notRun']), 'task')} did not run.")
    if summary.internal_error:
        lines.append(
            f"\n**Internal error** in the harness, not a verdict on the agent: {_text(summary.internal_error)}"
        )
    rate = "rate" if summary.task_rate is None else "tasks' mean rate"  # --runs auto: its tasks weigh alike
    lines += ["", f"| category | passed | total | {rate} |", "|---|---:|---:|---:|"]
    for category, counted in summary.by_category.items():
        lines.append(f"| {_text(category)} | {counted.passed} | {counted.total} | {percent(counted.rate, 1)}% |")
    page = _Page(lines)
    if comparison is not None and comparison.costs.tasks:
        _costs(page, comparison)
    if comparison is not None:
        page.add(drift_markdown(comparison.drift, _text))
    misses = listed = 0
    for entry in document["results"]:
        if entry["status"] == "pass":
            continue
        misses += 1
        if misses == 1:
            page.add(["", "### Not passing", ""])
        if listed == MISSES_LISTED or page.full:
            continue  # the results file and the HTML report have every task
        trial = explaining_trial(entry["trialResults"])
        tally = f", passed {entry['passes']}/{entry['trials']}" if entry["trials"] > 1 else ""
        expects = (
            f"expects {_text(entry['expected'])}, " if "expected" in entry else ""
        )  # results from before 0.3 lack it
        shown = trial or entry["trialResults"][0]
        state = quarantine_state(entry)
        held_text = f", quarantined until {_text(entry['quarantine']['until'])}: {state}" if state else ""
        listed += page.add(
            [
                f"- **{_text(entry['id'])}** ({_text(entry['category'])}, {entry['status']}{tally}{held_text}): "
                f"`{entry['code']}` {_text(clip(entry['reason'] or '', AGENT_TEXT_LIMIT))} — {expects}"
                f"called {_text(clip(calls_text(shown), AGENT_TEXT_LIMIT))}",
                *([f"  - budget: {_text(budget_text(entry['budget']))}"] if "budget" in entry else []),
                *(f"{'  ' * (depth + 1)}- {_text(clip(line, AGENT_TEXT_LIMIT))}" for depth, line in transcript(shown)),
            ]
        )
    unlisted = misses - listed
    where = f"the results file, {_code(os.path.basename(results_path))}" if results_path else "the results file"
    if page.full:
        page.lines.append(
            f"- … and {unlisted} more not shown: this summary stops at {SUMMARY_BYTES:,} bytes (GitHub shows at most"
            f" 1 MiB of a step's summary); every task is in {where}."
        )
    elif unlisted:
        page.lines.append(f"- … and {unlisted} more, in {where}.")
    return "\n".join(page.lines) + "\n\n"


def _costs(page: _Page, comparison: Comparison) -> None:
    """The cost of the tasks both runs measured alike, then and now: overall, with the growth limits, then per task
    (latency its median), as many tasks as fit of the first COST_TASKS_LISTED."""
    from harness.comparison import COST_TASKS_LISTED, cost_change, cost_figure, overall_change, task_figures
    from harness.costs import OVERALL_FIGURES

    costs = comparison.costs
    limits = {
        growth.figure: (growth.limit, growth.exceeded) for growth in comparison.growth if growth.limit is not None
    }
    page.add(
        [
            "",
            f"### Cost against the baseline ({count(len(costs.tasks), 'task')} measured alike, each task's mean per "
            "trial)",
            "",
            "| cost | then | now | change |",
            "|---|---:|---:|---|",
        ]
    )
    for key, label in OVERALL_FIGURES.items():
        then, now = costs.overall[key]
        limit, exceeded = limits.get(key, (None, False))
        bound = f" (limit {percent(limit, 10)}%{': **exceeded**' if exceeded else ''})" if limit is not None else ""
        page.add(
            [f"| {label} | {cost_figure(key, then)} | {cost_figure(key, now)} | {overall_change(costs, key)}{bound} |"]
        )
    page.add(["", "| task | tokens | tool calls | steps | latency (median) |", "|---|---|---|---|---|"])
    for task_id, then_cost, now_cost in costs.tasks[:COST_TASKS_LISTED]:
        shown = " | ".join(
            f"{cost_figure(key, a)} → {cost_figure(key, b)} ({cost_change(a, b)})"
            for _, key, a, b in task_figures(then_cost, now_cost)[:4]
        )
        page.add([f"| {_text(task_id)} | {shown} |"])
    if len(costs.tasks) > COST_TASKS_LISTED:
        page.add(
            [
                "",
                f"… and {len(costs.tasks) - COST_TASKS_LISTED} more tasks: the HTML report and `compare --out` have"
                " every one.",
            ]
        )


class _Page:
    """The summary's lines, taken whole while they fit under SUMMARY_BYTES with room left for the note."""

    def __init__(self, lines: list[str]) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.full = False
        for line in lines:
            self.add([line])

    def add(self, lines: list[str]) -> bool:
        """Take the lines, all or none; once some did not fit, none after them."""
        size = sum(len(line.encode("utf-8", "backslashreplace")) + 1 for line in lines)  # as it is written
        self.full = self.full or self.size + size > SUMMARY_BYTES - NOTE_BYTES
        if not self.full:
            self.lines += lines
            self.size += size
        return not self.full


def _ids(task_ids: tuple[str, ...]) -> str:
    return ", ".join(f"`{task_id}`" for task_id in task_ids)


def _text(value: str) -> str:
    # Reasons and calls can quote the agent: keep its text from becoming markup (a link, an image that reads as a green
    # badge, a table cell, code), or new lines, in the summary page.
    return MARKUP.sub(r"\\\g<0>", html.escape(printable(value), quote=False))


def _code(name: str) -> str:
    # Inside a code span a backslash shows as itself, and only a backtick could end it.
    quoted = printable(name).replace("`", "'")
    return f"`{quoted}`"
