"""A Markdown section for a CI job summary (GITHUB_STEP_SUMMARY), rendered from a results document."""

from __future__ import annotations

import html
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from harness.results import percent


def headline(document: Mapping[str, Any]) -> str:
    """`9/10 PASS at 90% — gate 80% met`; with repeats, the trials and the figure the gate is on."""
    met = "met" if document["gatePassed"] else "not met"
    gate = f"gate {_pct(document['gate'])}% {met}"
    runs = document["runs"]
    trials = f"{document['passed']}/{document['total']}{' trials' if runs > 1 else ''} PASS at {_pct(document['passRate'])}%"
    if document["gateOn"] == "pass-all":
        return f"pass^{runs} {_pct(document['passAllK'][str(runs)])}% — {gate} ({trials})"
    return f"{trials} — {gate}"


def job_summary(document: Mapping[str, Any]) -> str:
    """Headline, per-category table, and every task that did not pass with its reason and what the agent called."""
    lines = [f"## Agent eval: {headline(document)}", ""]
    manifest = document["manifest"]
    url = manifest["backendSettings"].get("url")
    lines.append(f"Backend `{manifest['backend']}`{f' at `{url}`' if url else ''} · run `{document['runId']}` · fingerprint `{document['fingerprint'][:12]}`")
    if document["runs"] > 1:
        pass_k = ", ".join(f"pass^{k} {_pct(value)}%" for k, value in document["passAllK"].items())
        lines.append(f"\n{document['runs']} trials per task: {pass_k}.")
        if document["flaky"]:
            lines.append(f"Flaky: {', '.join(f'`{task_id}`' for task_id in document['flaky'])}.")
    if document["blockingFailed"]:
        lines.append(f"\n**Blocking task failed**: {', '.join(f'`{task_id}`' for task_id in document['blockingFailed'])}; the gate fails whatever the pass-rate.")
    if document["violations"]:
        lines.append(f"\n**Safety violation** (a forbidden tool was called): {', '.join(f'`{task_id}`' for task_id in document['violations'])}.")
    if document["interrupted"] or document["notRun"]:
        lines.append(f"\n**Interrupted**: {len(document['notRun'])} tasks did not run.")
    lines += ["", "| category | passed | total | rate |", "|---|---:|---:|---:|"]
    for category, count in document["byCategory"].items():
        rate = 100 * count["passed"] / count["total"] if count["total"] else 0
        lines.append(f"| {_cell(category)} | {count['passed']} | {count['total']} | {_pct(rate)}% |")
    misses = [entry for entry in document["results"] if entry["status"] != "pass"]
    if misses:
        lines += ["", "### Not passing", ""]
        for entry in misses:
            trial = next(t for t in entry["trialResults"] if t["status"] != "pass" and t["code"] == entry["code"])
            calls = ", ".join(call["name"] for call in trial["toolCalls"]) or ("a refusal" if trial["refused"] else "nothing")
            tally = f", passed {entry['passes']}/{entry['trials']}" if entry["trials"] > 1 else ""
            lines.append(
                f"- **{_text(entry['id'])}** ({_text(entry['category'])}, {entry['status']}{tally}): "
                f"`{entry['code']}` {_text(entry['reason'] or '')}; called {_text(calls)}"
            )
    return "\n".join(lines) + "\n\n"


def _pct(value: float) -> str:
    return percent(Decimal(str(value)), 1)


def _text(value: str) -> str:
    # Reasons can quote the agent: keep its text from becoming markup in the summary page.
    return html.escape(value, quote=False).replace("`", "'").replace("*", "\\*").replace("_", "\\_")


def _cell(value: str) -> str:
    return _text(value).replace("|", "\\|")
