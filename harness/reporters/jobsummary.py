"""A Markdown section for a CI job summary (GITHUB_STEP_SUMMARY), rendered from a results document."""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from harness.records import Summary
from harness.results import explaining_trial
from harness.text import calls_text, headline, percent, printable, transcript

MISSES_LISTED = 100  # tasks that did not pass, listed one by one


def job_summary(document: Mapping[str, Any], summary: Summary, html_path: str | None = None) -> str:
    """Headline, per-category table, and every task that did not pass: its reason, what it expects, what was called;
    and the name of the HTML report, when there is one."""
    lines = [f"## Agent eval: {_text(headline(summary))}", ""]
    manifest = document["manifest"]
    url = manifest["backendSettings"].get("url")
    lines.append(
        f"Backend `{manifest['backend']}`{f' at `{url}`' if url else ''} · run `{document['runId']}`"
        f" · fingerprint `{document['fingerprint'][:12]}`"
    )
    if html_path:
        name = _text(os.path.basename(html_path))
        lines.append(f"\nThe whole run, task by task: `{name}` (the HTML report, with the results).")
    if summary.runs > 1:
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
    if document["interrupted"] or document["notRun"]:
        lines.append(f"\n**Interrupted**: {len(document['notRun'])} tasks did not run.")
    if summary.internal_error:
        lines.append(
            f"\n**Internal error** in the harness, not a verdict on the agent: {_text(summary.internal_error)}"
        )
    lines += ["", "| category | passed | total | rate |", "|---|---:|---:|---:|"]
    for category, count in summary.by_category.items():
        lines.append(
            f"| {_cell(category)} | {count.passed} | {count.total} "
            f"| {percent(Fraction(100 * count.passed, count.total or 1), 1)}% |"
        )
    misses = 0
    for entry in document["results"]:
        if entry["status"] == "pass":
            continue
        misses += 1
        if misses == 1:
            lines += ["", "### Not passing", ""]
        if misses > MISSES_LISTED:
            continue  # a step's summary is capped at 1 MiB; the results file and the HTML report have every task
        trial = explaining_trial(entry["trialResults"])
        tally = f", passed {entry['passes']}/{entry['trials']}" if entry["trials"] > 1 else ""
        expects = (
            f"expects {_text(entry['expected'])}, " if "expected" in entry else ""
        )  # results from before 0.3 lack it
        shown = trial or entry["trialResults"][0]
        lines.append(
            f"- **{_text(entry['id'])}** ({_text(entry['category'])}, {entry['status']}{tally}): "
            f"`{entry['code']}` {_text(entry['reason'] or '')} — {expects}"
            f"called {_text(calls_text(shown))}"
        )
        lines += [f"{'  ' * (depth + 1)}- {_text(line)}" for depth, line in transcript(shown)]
    if misses > MISSES_LISTED:
        lines.append(f"- … and {misses - MISSES_LISTED} more, in the results file.")
    return "\n".join(lines) + "\n\n"


def _ids(task_ids: tuple[str, ...]) -> str:
    return ", ".join(f"`{task_id}`" for task_id in task_ids)


def _text(value: str) -> str:
    # Reasons can quote the agent: keep its text from becoming markup, or new lines, in the summary page.
    return html.escape(printable(value), quote=False).replace("`", "'").replace("*", "\\*").replace("_", "\\_")


def _cell(value: str) -> str:
    return _text(value).replace("|", "\\|")
