"""One self-contained HTML page per run, rendered from a results document: the verdict, the run's facts, charts, and
every task with its trials. Nothing in it is trusted: every string is escaped, and a Content-Security-Policy allows
no network and no script but the page's own."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from html import escape
from typing import TYPE_CHECKING, Any

from harness.drift import drift_html
from harness.records import Growth, Outputs, Summary
from harness.text import (
    GROWTH_FIGURES,
    REASONS,
    budget_text,
    calls_text,
    count,
    growth_reason,
    millis,
    percent,
    printable,
    quarantine_state,
    trials_saved,
)
from harness.verdict import BUDGET_BREACHES

if TYPE_CHECKING:
    from harness.comparison import Comparison

CLIP = 2000  # characters of a value shown at once; the whole value stays in the page, a click away
CELL = 300  # characters of a table cell
STATUSES = ("pass", "fail", "error")
SOURCES = {"unscripted": "no result scripted"}  # the other sources read as they are
CHANGES = ("regressed", "fixed", "still failing", "new", "removed", "not run", "changed definition")

STYLE = """
[hidden]{display:none!important}
:root{--pass:#1a7f37;--fail:#cf222e;--error:#9a6700;--muted:#57606a;--line:#d0d7de;--bg:#f6f8fa}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1200px;padding:16px;
color:#1f2328}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:12px 0 4px}
.verdict{border:2px solid var(--fail);border-radius:8px;padding:12px 16px;background:#fff5f5}
.verdict.met{border-color:var(--pass);background:#f4fff6}
.why{font-weight:600;color:var(--fail)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%}
.tasks .r{display:grid;grid-template-columns:5.5em 15% 12% 22% 1fr 4.5em 5em 8.5em;border-bottom:1px solid var(--line)}
.tasks .r>span{padding:4px 6px;overflow-wrap:anywhere}.tasks .r>span.n{text-align:right;white-space:nowrap}
.tasks .h{background:var(--bg);font-weight:600;position:sticky;top:0;z-index:1}.tasks .h>span{white-space:nowrap}
.tasks .t{border-bottom:2px solid var(--line);content-visibility:auto;contain-intrinsic-size:auto 64px}
.tasks details{padding:0 6px 4px}
th,td{text-align:left;vertical-align:top;padding:4px 6px;border-bottom:1px solid var(--line);overflow-wrap:anywhere}
th{background:var(--bg)}td.n{text-align:right;white-space:nowrap}
.st{font-weight:700;white-space:nowrap}
.st.pass{color:var(--pass)}.st.fail{color:var(--fail)}.st.error{color:var(--error)}
.badge{display:inline-block;font-size:11px;border:1px solid var(--muted);border-radius:10px;padding:0 6px;margin:1px;
white-space:nowrap}
.badge.v,.badge.fail{border-color:var(--fail);color:var(--fail)}
.badge.pass{border-color:var(--pass);color:var(--pass)}.badge.error{border-color:var(--error);color:var(--error)}
pre{white-space:pre-wrap;word-break:break-all;background:var(--bg);padding:6px;margin:4px 0;max-height:40em;
overflow:auto}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
.trial{border-left:3px solid var(--line);padding-left:8px;margin:8px 0}
.trial.pass{border-color:var(--pass)}.trial.fail{border-color:var(--fail)}.trial.error{border-color:var(--error)}
.turn{margin-left:8px}.muted{color:var(--muted)}
form#filters{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin:8px 0;padding:8px;background:var(--bg)}
svg text{font:12px system-ui,sans-serif}
ul.changes li{margin:2px 0}
@media print{form#filters{display:none}.tasks .h{position:static}.tasks .t{content-visibility:visible}
details::details-content{content-visibility:visible;
display:block}}
"""

SCRIPT = """
(function () {
  var form = document.getElementById("filters");
  var rows = Array.prototype.slice.call(document.querySelectorAll(".tasks .t"));
  var texts = rows.map(function (row) { return row.firstElementChild.textContent.toLowerCase(); });
  var boxes = Array.prototype.slice.call(form.querySelectorAll("input[name=s]"));
  var category = form.querySelector("select");
  var search = form.querySelector("input[type=search]");
  var shown = document.getElementById("shown");
  function apply() {
    var statuses = {};
    boxes.forEach(function (box) { statuses[box.value] = box.checked; });
    var wanted = category.value, needle = search.value.trim().toLowerCase(), n = 0;
    rows.forEach(function (row, i) {
      var show = statuses[row.dataset.s] && (!wanted || row.dataset.c === wanted) &&
        (!needle || texts[i].indexOf(needle) >= 0);
      row.hidden = !show;
      if (show) { n += 1; }
    });
    shown.textContent = n + " of " + rows.length + (rows.length === 1 ? " task shown" : " tasks shown");
  }
  form.addEventListener("input", apply);
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  form.hidden = false;
  apply();
})();
"""


def _hash(source: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")


# No network at all, and no script or style but the page's own, named by hash: an agent's words stay words.
CSP = (
    f"default-src 'none'; script-src '{_hash(SCRIPT)}'; style-src '{_hash(STYLE)}'; img-src 'none'; "
    "base-uri 'none'; form-action 'none'"
)


def render(
    document: Mapping[str, Any], summary: Summary, outputs: Outputs, comparison: Comparison | None
) -> Iterator[str]:
    """The report as harness.reporters.REPORTS renders it: with the changes against the run's baseline, if any."""
    return html_report(document, comparison, document.get("baseline", {}).get("path", ""))


def html_report(
    document: Mapping[str, Any], comparison: Comparison | None = None, baseline_name: str = ""
) -> Iterator[str]:
    """The page for a results document, in pieces as its entries stream by; with the changes against a baseline when
    a comparison is given."""
    return _page(document, comparison, baseline_name)


def _page(document: Mapping[str, Any], comparison: Comparison | None, baseline_name: str) -> Iterator[str]:
    title = f"Agent eval: {document['passed']}/{document['total']} passed"
    yield (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>\n"
    )
    yield from _verdict(document)
    if comparison is not None:
        yield from _changes(comparison, baseline_name)
    yield from _facts(document)
    yield from _categories(document)
    if document["runs"] > 1:
        yield from _pass_hat_k(document)
    yield from _tasks(document)
    yield f"<script>{SCRIPT}</script>\n</body></html>\n"


def _gated_on(document: Mapping[str, Any]) -> str:
    """What a gate on pass-all is on: pass^runs, or under --runs auto every trial of a task passing."""
    return " on pass-all" if "adaptive" in document else f" on pass^{document['runs']}"


def _verdict(document: Mapping[str, Any]) -> Iterator[str]:
    met = document["gatePassed"]
    rate = Fraction(document["passRate"]).limit_denominator(10**6)
    trials = " trials" if document["runs"] > 1 or "adaptive" in document else ""
    # --runs auto: the rate is the tasks' mean, not passed over all trials (tasks ran different numbers of trials)
    rate_text = f"the tasks at {percent(rate, 1)}% on average" if "adaptive" in document else f"{percent(rate, 1)}%"
    yield f'<section class="verdict{" met" if met else ""}" id="verdict">'
    yield (
        f"<h1>{'Gate met' if met else 'Gate not met'}: {document['passed']}/{document['total']}{trials} passed, "
        f"{rate_text} (gate {percent(Fraction(document['gate']).limit_denominator(10**6), 2)}%"
        f"{_gated_on(document) if document['gateOn'] == 'pass-all' else ''})</h1>"
    )
    if not met:
        reasons = [_reason(document, code) for code in document["gateFailedBecause"]]
        yield f'<p class="why">Why: {_e(", ".join(reasons))}</p>'
    parts = [f"{document['passed']} passed", f"{document['failed']} failed", count(document["errored"], "error")]
    parts += [count(len(document["violations"]), "safety violation")] if document["violations"] else []
    parts += [f"{document['overBudget']} over budget"] if document.get("overBudget") else []
    parts += [f"{len(document['flaky'])} flaky"] if document["flaky"] else []
    parts += [f"{len(document['notRun'])} not run"] if document["notRun"] else []
    yield f"<p>{_e(' · '.join(parts))}</p>"
    if "quarantined" in document:
        held = document["quarantined"]
        yield (
            f'<p class="muted">{count(len(held["tasks"]), "task")} quarantined, run and shown but not gated (a safety'
            f" violation fails the gate all the same): {_e(', '.join(held['tasks']))};"
            f" {held['passed']}/{held['total']}{trials} passed.</p>"
        )
    if document.get("internalError"):
        yield f'<p class="why">Internal error in the harness: {_e(document["internalError"])}</p>'
    yield "</section>\n"


def _reason(document: Mapping[str, Any], code: str) -> str:
    if code in GROWTH_FIGURES:  # how much it grew, against which limit, as the headline says it
        figure = GROWTH_FIGURES[code][0]
        grown = document.get("growth", {}).get(figure)
        if grown is not None:
            limit = None if grown["limit"] is None else Decimal(str(grown["limit"]))
            return growth_reason(Growth(figure, grown["then"], grown["now"], limit, grown["tasks"]))
    tasks = {
        "blocking-failed": document["blockingFailed"],
        "regression": document["regressed"],
        "quarantine-violation": document.get("quarantined", {}).get("violations"),
    }.get(code)
    text = REASONS.get(code, code)
    return f"{text} ({', '.join(tasks)})" if tasks else text


def _changes(comparison: Comparison, baseline_name: str) -> Iterator[str]:
    yield f'<section id="changes"><h2>Against the baseline {_e(baseline_name)}</h2>'
    for label, then, now in comparison.settings:
        then, now = ("(none)" if value is None else str(value) for value in (then, now))
        yield f'<p class="muted">Setting changed: {_e(label)} {_e(then)} → {_e(now)}</p>'
    for change in CHANGES:
        tasks = [task for task in comparison.tasks if task.change == change]
        if tasks:
            yield f'<h3>{_e(change.capitalize())} ({len(tasks)})</h3><ul class="changes">'
            yield "".join(
                f"<li><b>{_e(task.id)}</b> {_e(_clip(task.detail, CELL))}"
                + (' <span class="badge">quarantined: not gated</span>' if task.quarantined else "")
                + "</li>"
                for task in tasks
            )
            yield "</ul>"
    yield "<table><thead><tr><th>category</th><th>then</th><th>now</th><th>change</th></tr></thead><tbody>"
    rows = [*comparison.by_category.items(), ("overall", comparison.overall)]
    for category, (then, now) in rows:
        delta = "" if then is None or now is None else f"{float(now - then):+.1f} pts" if now != then else "no change"
        yield (
            f'<tr><td>{_e(category)}</td><td class="n">{_rate(then)}</td><td class="n">{_rate(now)}</td>'
            f"<td>{_e(delta)}</td></tr>"
        )
    yield "</tbody></table>"
    if comparison.costs.tasks:
        yield from _costs(comparison)
    yield from drift_html(comparison.drift, _e)
    yield "</section>\n"


def _costs(comparison: Comparison) -> Iterator[str]:
    """The cost of the tasks both runs measured alike, then and now: overall with the growth limits, then every task."""
    from harness.comparison import cost_change, cost_figure, overall_change, task_figures
    from harness.costs import OVERALL_FIGURES

    costs = comparison.costs
    limits = {
        growth.figure: (growth.limit, growth.exceeded) for growth in comparison.growth if growth.limit is not None
    }
    yield (
        f"<h3>Cost ({count(len(costs.tasks), 'task')} measured alike, each task's mean per trial)</h3>"
        '<table id="costs"><thead><tr><th>cost</th><th>then</th><th>now</th><th>change</th></tr></thead><tbody>'
    )
    for key, label in OVERALL_FIGURES.items():
        then, now = costs.overall[key]
        limit, exceeded = limits.get(key, (None, False))
        bound = f" (limit {percent(limit, 10)}%{': exceeded' if exceeded else ''})" if limit is not None else ""
        yield (
            f'<tr><td>{_e(label)}</td><td class="n">{_e(cost_figure(key, then))}</td>'
            f'<td class="n">{_e(cost_figure(key, now))}</td><td>{_e(overall_change(costs, key) + bound)}</td></tr>'
        )
    yield (
        '</tbody></table><table id="task-costs"><thead><tr><th>task</th><th>tokens</th><th>tool calls</th>'
        "<th>steps</th><th>latency median</th><th>latency p95</th></tr></thead><tbody>"
    )
    for task_id, then_cost, now_cost in costs.tasks:
        shown = "".join(
            f"<td>{_e(f'{cost_figure(key, a)} → {cost_figure(key, b)} ({cost_change(a, b)})')}</td>"
            for _, key, a, b in task_figures(then_cost, now_cost)
        )
        yield f"<tr><td>{_e(task_id)}</td>{shown}</tr>"
    yield "</tbody></table>"


def _rate(value: Fraction | None) -> str:
    return "-" if value is None else f"{percent(value, 1)}%"


def _facts(document: Mapping[str, Any]) -> Iterator[str]:
    manifest = document["manifest"]
    settings = manifest.get("backendSettings", {})
    task_file = manifest.get("taskFile", {})
    selection = manifest.get("selection", {})
    usage = document.get("usage")
    facts = [
        ("backend", manifest.get("backend")),
        ("model", settings.get("model")),
        ("agent", settings.get("url") or settings.get("command")),
        ("task file", task_file.get("path")),
        ("task file SHA-256", task_file.get("sha256")),
        ("git commit", manifest.get("gitCommit")),
        ("started", document["startedAt"]),
        ("duration", f"{document['durationMs'] / 1000:.1f} s"),
        ("runs", _runs(document)),
        (
            "shard",
            selection.get("shard") or (f"{manifest['mergedShards']} merged" if "mergedShards" in manifest else None),
        ),
        (
            "tokens",
            f"{usage['inputTokens']} in, {usage['outputTokens']} out, {usage['latencyMs'] / 1000:.1f} s of replies"
            if usage
            else None,
        ),
        ("harness", f"{manifest.get('harnessVersion')} on Python {manifest.get('python')}"),
        ("run id", document["runId"]),
        ("fingerprint", document["fingerprint"]),
    ]
    yield '<section id="facts"><h2>The run</h2><dl class="facts">'
    yield "".join(f"<dt>{_e(name)}</dt><dd>{_e(str(value))}</dd>" for name, value in facts if value is not None)
    yield "</dl></section>\n"


def _runs(document: Mapping[str, Any]) -> str:
    """The runs fact: N, or under --runs auto its most trials, settings and the trials it saved."""
    auto = document.get("adaptive")
    if auto is None:
        return str(document["runs"])
    return (
        f"auto:{auto['max']} ({auto['confidence']:g}% confidence, {auto['reliability']:g}% reliability): "
        f"{trials_saved(auto)}"
    )


def _categories(document: Mapping[str, Any]) -> Iterator[str]:
    categories = list(document["byCategory"].items())
    width, label, bar = 760, 220, 400
    height = 22 * len(categories) + 8
    yield f'<section id="categories"><h2>By category</h2><svg role="img" width="{width}" height="{height}">'
    yield "<title>pass-rate per category</title>"
    for i, (category, counts) in enumerate(categories):
        y = 4 + 22 * i
        passed, total = counts["passed"], counts["total"]
        if "passRate" in counts:  # --runs auto: its tasks' mean rate, each weighing alike, as the run's
            rate: Fraction | None = Fraction(counts["passRate"]).limit_denominator(10**6)
            shown = f"{passed}/{total} trials ({_rate(rate)} on average)"
        else:
            rate = Fraction(100 * passed, total) if total else None
            shown = f"{passed}/{total} ({_rate(rate)})"
        filled = round(bar * rate / 100) if rate is not None else 0
        colour = "var(--pass)" if passed == total else "var(--fail)"
        yield (
            f'<text x="{label - 8}" y="{y + 14}" text-anchor="end">{_e(_clip(category, 40))}</text>'
            f'<rect x="{label}" y="{y}" width="{bar}" height="16" fill="#eaeef2"/>'
            f'<rect x="{label}" y="{y}" width="{filled}" height="16" fill="{colour}"/>'
            f'<text x="{label + bar + 8}" y="{y + 14}">{shown}</text>'
        )
    yield "</svg></section>\n"


def _pass_hat_k(document: Mapping[str, Any]) -> Iterator[str]:
    points = sorted((int(k), value) for k, value in document["passAllK"].items())
    width, height, left, top = 520, 200, 40, 10
    plot_w, plot_h = width - left - 20, height - top - 30

    def xy(k: int, value: float) -> tuple[float, float]:
        x = left + (plot_w * (k - 1) / max(1, len(points) - 1))
        return round(x, 1), round(top + plot_h * (1 - value / 100), 1)

    line = " ".join(f"{x},{y}" for x, y in (xy(k, v) for k, v in points))
    yield '<section id="pass-hat-k"><h2>pass^k: every one of k trials passed</h2>'
    yield f'<svg role="img" width="{width}" height="{height}"><title>pass^k for k = 1 to {len(points)}</title>'
    yield f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#8c959f"/>'
    yield f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#8c959f"/>'
    yield f'<text x="{left - 4}" y="{top + 10}" text-anchor="end">100</text>'
    yield f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>'
    yield f'<polyline points="{line}" fill="none" stroke="var(--pass)" stroke-width="2"/>'
    for k, value in points:
        x, y = xy(k, value)
        anchor = "start" if k == 1 else "end" if k == len(points) else "middle"  # clear of the axis and the edge
        yield (
            f'<circle cx="{x}" cy="{y}" r="3" fill="var(--pass)"/>'
            f'<text x="{x}" y="{top + plot_h + 16}" text-anchor="middle">k={k}</text>'
            f'<text x="{x}" y="{y - 6}" text-anchor="{anchor}">{value:.1f}%</text>'
        )
    yield "</svg>"
    if document["flaky"]:
        yield f"<p>Flaky (some trials passed, some did not): {_e(', '.join(document['flaky']))}</p>"
    yield "</section>\n"


def _tasks(document: Mapping[str, Any]) -> Iterator[str]:
    entries = document["results"]
    categories = list(document["byCategory"])
    yield f'<section id="tasks"><h2>Tasks ({len(entries)})</h2>'
    # The filters need the script: without it they stay hidden, and the table reads as it is.
    yield '<form id="filters" hidden>'
    yield "".join(
        f'<label><input type="checkbox" name="s" value="{status}" checked> {status}</label>' for status in STATUSES
    )
    yield '<label>category <select><option value="">all</option>'
    yield "".join(f'<option value="{_e(category)}">{_e(_clip(category, 60))}</option>' for category in categories)
    yield '</select></label><label>search <input type="search" placeholder="id, call, reason"></label>'
    yield f'<span id="shown">{count(len(entries), "task")}</span></form>'
    # One table, laid out as a grid of rows: a row off screen is not rendered until it scrolls in (10,000 rows load
    # in a third of the time a <table> takes), and a long value wraps inside its column.
    headers = ("status", "task", "category", "called", "reason", "time", "passed", "")
    yield '<div class="tasks" role="table" aria-label="tasks"><div class="r h" role="row">'
    yield "".join(f'<span role="columnheader">{header}</span>' for header in headers) + "</div>"
    for index, entry in enumerate(entries):
        yield from _task(index, entry)
    yield "</div></section>\n"


def _task(index: int, entry: Mapping[str, Any]) -> Iterator[str]:
    trials = entry["trialResults"]
    shown = next((trial for trial in trials if trial["status"] == "fail"), None) or next(
        (trial for trial in trials if trial["status"] != "pass"), trials[0]
    )
    status = entry["status"] if entry["status"] in STATUSES else "error"
    duration = sum(trial["durationMs"] for trial in trials) / len(trials)
    reason = f"{entry['code']}: {entry['reason']}" if entry["status"] != "pass" else ""
    badges = (["blocking"] if entry.get("blocking") else []) + (["flaky"] if entry.get("flaky") else [])
    badges += ["over budget"] if any(trial["code"] in BUDGET_BREACHES for trial in trials) else []
    held = entry.get("quarantine")
    badges += [f"quarantined until {_e(held['until'])}"] if held and held["active"] else []  # joined unescaped
    violation = '<span class="badge v">safety violation</span>' if entry.get("violation") else ""
    cells = [
        _cell(status.upper(), f"st {status}"),
        _cell(_e(_clip(entry["id"], CELL))),
        _cell(_e(_clip(entry["category"], CELL))),
        _cell(_e(_clip(calls_text(shown), CELL))),
        _cell(_e(_clip(reason, CELL))),
        _cell(millis(duration), "n"),
        _cell(f"{entry['passes']}/{entry['trials']}", "n"),
        _cell("".join(f'<span class="badge">{badge}</span>' for badge in badges) + violation),
    ]
    yield (
        f'<div class="t" id="task-{index}" role="rowgroup" data-s="{status}" data-c="{_e(entry["category"])}">'
        f'<div class="r" role="row">{"".join(cells)}</div>'
    )
    summary = f"prompt, expectation and {count(len(trials), 'trial')}"
    yield f"<details><summary>{summary}</summary>"
    prompt = entry.get("prompt")
    yield (
        f'<h3>Prompt</h3><div class="text">{_long(prompt)}</div>'
        if isinstance(prompt, str)
        else '<p class="muted">The prompt is not in this results file (written before 0.4).</p>'
    )
    if "expected" in entry:
        yield f"<h3>Expected</h3><p>{_e(_clip(entry['expected'], CLIP))}</p>"
    if "budget" in entry:
        yield f'<h3>Budget</h3><p class="budget">{_e(_clip(budget_text(entry["budget"]), CLIP))}</p>'
    if held:
        state = quarantine_state(entry) or "over: it counted for the gate"
        issue = f", {held['issue']}" if held["issue"] else ""
        why = _e(_clip(held["reason"] + issue, CLIP))
        yield f"<h3>Quarantine</h3><p>Until {_e(held['until'])} ({state}): {why}</p>"
    for number, trial in enumerate(trials, 1):
        yield from _trial(number, trial)
    yield "</details></div>\n"


def _cell(html: str, kind: str = "") -> str:
    return f'<span role="cell" class="{kind}">{html}</span>' if kind else f'<span role="cell">{html}</span>'


def _trial(number: int, trial: Mapping[str, Any]) -> Iterator[str]:
    status = trial["status"] if trial["status"] in STATUSES else "error"
    verdict = status if status == "pass" else f"{status} {trial['code']}: {trial['reason']}"
    facts = [f"{count(trial['attempts'], 'attempt')}", millis(trial["durationMs"])]
    if trial.get("usage"):
        facts.append(f"{trial['usage']['inputTokens']} tokens in, {trial['usage']['outputTokens']} out")
    if "conversation" in trial:
        facts.append(f"{count(trial['steps'], 'step')}, {count(trial['turns'], 'turn')}")
    yield (
        f'<div class="trial {status}"><h3>Trial {number}: {_e(_clip(verdict, CLIP))}</h3>'
        f'<p class="muted">{_e(" · ".join(facts))}</p>'
    )
    if "conversation" in trial:
        for turn_number, turn in enumerate(trial["conversation"], 1):
            yield f'<div class="turn"><h3>Turn {turn_number}{_turn_verdict(turn.get("verdict"))}'
            yield f'<p><b>User:</b> <span class="text">{_long(turn["user"])}</span></p>'
            for step_number, step in enumerate(turn["steps"], 1):
                yield f"<p><b>Step {step_number}</b></p>"
                yield from _said(step["toolCalls"], step.get("text"), step.get("results", ()), step.get("error"))
            yield "</div>"
    else:
        yield from _said(trial["toolCalls"], trial.get("text"), (), None)
        if trial.get("refused") and not trial["toolCalls"]:
            by = f" by the provider ({trial.get('refusalReason')})" if trial.get("refusedBy") == "provider" else ""
            yield f"<p>Refused{_e(by)}.</p>"
    if "finalState" in trial:
        yield from _final_state(trial)
    yield "</div>"


def _turn_verdict(verdict: Mapping[str, Any] | None) -> str:
    """The rest of a turn's heading: its verdict's badge, and a non-pass's code and reason below it."""
    if verdict is None:  # a turn without expectations of its own, or an older results file
        return "</h3>"
    status = verdict["status"] if verdict["status"] in STATUSES else "error"
    badge = f' <span class="badge {status}">{status}</span></h3>'
    if status == "pass":
        return badge
    return f'{badge}<p class="why">{_e(_clip(_miss(verdict), CLIP))}</p>'


def _miss(verdict: Mapping[str, Any]) -> str:
    return f"{verdict['code']}: {verdict['reason']}"


def _final_state(trial: Mapping[str, Any]) -> Iterator[str]:
    """The state the environment ended in, folded, under the mismatch that failed the trial (its path and values)."""
    if trial["code"] == "state:mismatch":
        yield f'<p class="why">{_e(_clip(_miss(trial), CLIP))}</p>'
    cut = trial.get("finalStateCut", False)  # then the state is its JSON text, cut
    notes = [" (cut at 64 KiB)" if cut else ""]
    if "referenceStateSha256" in trial:
        notes.append(f", held to the reference state (SHA-256 {trial['referenceStateSha256']})")
    yield (
        f"<details><summary>Final state{_e(''.join(notes))}</summary>"
        f"<pre>{_long(_pretty(trial['finalState']))}</pre></details>"
    )


def _said(
    calls: Sequence[Mapping[str, Any]], text: Any, results: Sequence[Mapping[str, Any]], error: Any
) -> Iterator[str]:
    for call in calls:
        reported = call.get("reportedName")
        named = f" (reported as {_e(_clip(str(reported), CELL))})" if reported else ""
        yield (
            f"<p>Called <b>{_e(_clip(str(call['name']), CELL))}</b>{named}</p><pre>{_long(_pretty(call['args']))}</pre>"
        )
    for result in results:
        yield (
            f"<p>{_e(_clip(str(result['name']), CELL))} returned{_source(result)}</p>"
            f"<pre>{_long(_pretty(result['result']))}</pre>"
        )
    if isinstance(text, str) and text:
        yield f'<p><b>Said:</b> <span class="text">{_long(text)}</span></p>'
    if error:
        yield f"<p><b>Error:</b> {_e(_clip(str(error), CLIP))}</p>"
    if not calls and not text and not error:
        yield '<p class="muted">No call, no text.</p>'


def _source(result: Mapping[str, Any]) -> str:
    """Where a played-back result came from, as a badge (sequence, cases[0], default, environment, no result
    scripted); none for the task's one scripted value."""
    source = result.get("source")
    if source in (None, "script"):  # the task's one value for the tool (an older results file has no source)
        return "" if result.get("scripted", True) else " (no result scripted)"
    label = SOURCES.get(source, source) if source != "case" else f"cases[{result.get('case')}]"
    return f' <span class="badge">{_e(label)}</span>'


def _pretty(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def _long(text: str) -> str:
    """Escaped text, clipped on screen; a longer text's whole is in the page, behind a click."""
    if len(text) <= CLIP:
        return _e(text)
    return (
        f"{_e(text[:CLIP])}…<details><summary>all {len(text):,} characters</summary>"
        f'<div class="text">{_e(text)}</div></details>'
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _e(text: str) -> str:
    # Escaped for text and for attributes alike; control characters, bidirectional overrides and lone surrogates (which
    # no encoding writes) shown as their escapes, as on the console, but line breaks and tabs kept: the page shows them.
    return escape(printable(text, keep="\n\t"), quote=True)
