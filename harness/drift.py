"""Per-tool drift between two runs: each tool's calls, the argument keys it gained or lost, the values that changed
for the same task, and the tasks whose chosen tool changed: what a provider or model swap changed, at a glance.
Kept apart from harness/comparison.py, which judges pass and fail; this reads only the calls the trials made."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from harness.records import record
from harness.schema import json_equal
from harness.text import clip, count

VALUE_EXAMPLES = 3  # values changed shown per tool; the count says how many there were
VALUE_WIDTH = 40  # characters of a value shown, clipped
SWITCHES_LISTED = 50  # tasks whose chosen tool changed, listed one by one in text; the JSON has them all


@record
class ValueChange:
    """One argument's value in a task's first trial, then and now, for the same tool (JSON, clipped)."""

    task: str
    key: str
    then: str
    now: str


@record
class ToolDrift:
    """One tool's calls in the baseline and the candidate, over the tasks both ran."""

    tool: str
    calls: tuple[int, int]  # then, now
    per_run: tuple[Fraction, Fraction]  # calls over each side's --runs
    per_trial: tuple[Fraction, Fraction]  # calls over each side's trials of those tasks
    keys_added: tuple[str, ...]
    keys_dropped: tuple[str, ...]
    values_changed: int
    values: tuple[ValueChange, ...]  # the first VALUE_EXAMPLES


@record
class ToolSwitch:
    """A task whose first call, in its first trial, is of another tool now (None: no call)."""

    task: str
    then: str | None
    now: str | None


@record
class Drift:
    """The tools whose use drifted and the tasks whose chosen tool changed; both empty when the runs call alike."""

    tools: tuple[ToolDrift, ...]
    switches: tuple[ToolSwitch, ...]
    tasks: int  # tasks both runs ran, which this is over


def drift(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> Drift:
    """Each tool's drift over the tasks both runs ran, and those tasks whose chosen tool changed."""
    before = {entry["id"]: entry for entry in baseline["results"]}
    pairs = [
        (before[entry["id"]], entry)
        for entry in candidate["results"]
        if entry["id"] in before and _has_calls(entry) and _has_calls(before[entry["id"]])
    ]
    sides = ([then for then, _ in pairs], [now for _, now in pairs])
    trials = tuple(sum(len(_trials(entry)) for entry in side) for side in sides)
    # Trials of a task per run: a side of --runs auto ran each task as many as its test needed, its mean here.
    runs = tuple(
        Fraction(count, len(side) or 1)
        if "adaptive" in document.get("manifest", {})
        else Fraction(max(document.get("runs", 1), 1))
        for document, side, count in zip((baseline, candidate), sides, trials, strict=True)
    )
    used: dict[str, list[list[Mapping[str, Any]]]] = {}
    for index, side in enumerate(sides):
        for entry in side:
            for calls in _trials(entry):
                for call in calls:
                    used.setdefault(call["name"], [[], []])[index].append(call)
    changes: dict[str, list[ValueChange]] = {}
    switches = []
    for then, now in pairs:
        first_then, first_now = _first_calls(then), _first_calls(now)
        chosen = (first_then[0]["name"] if first_then else None, first_now[0]["name"] if first_now else None)
        if chosen[0] != chosen[1]:
            switches.append(ToolSwitch(now["id"], *chosen))
        for tool, change in _value_changes(now["id"], first_then, first_now):
            changes.setdefault(tool, []).append(change)
    tools = []
    for tool, (calls_then, calls_now) in sorted(used.items()):
        keys_then, keys_now = _keys(calls_then), _keys(calls_now)
        per_trial = (Fraction(len(calls_then), trials[0] or 1), Fraction(len(calls_now), trials[1] or 1))
        found = changes.get(tool, [])
        # A tool one side never called has no keys to compare: its calls say enough.
        both = bool(calls_then and calls_now)
        added = tuple(sorted(keys_now - keys_then)) if both else ()
        dropped = tuple(sorted(keys_then - keys_now)) if both else ()
        if per_trial[0] != per_trial[1] or added or dropped or found:
            tools.append(
                ToolDrift(
                    tool,
                    (len(calls_then), len(calls_now)),
                    (Fraction(len(calls_then), runs[0]), Fraction(len(calls_now), runs[1])),
                    per_trial,
                    added,
                    dropped,
                    len(found),
                    tuple(found[:VALUE_EXAMPLES]),
                )
            )
    return Drift(tuple(tools), tuple(switches), len(pairs))


def trial_calls(trial: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every call a trial made, in order: each step's of a conversation, else the trial's own."""
    if "conversation" in trial:
        return [call for turn in trial["conversation"] for step in turn["steps"] for call in step["toolCalls"]]
    return list(trial["toolCalls"])


def drift_lines(found: Drift) -> list[str]:
    """The "Tool drift" section of compare's text: a table of tools, the values changed, the tasks whose chosen tool
    changed; nothing when nothing drifted."""
    if not found.tools and not found.switches:
        return []
    lines = [f"Tool drift (over the {count(found.tasks, 'task')} both runs ran; per trial: calls over trials)"]
    if found.tools:
        rows = [("tool", "calls", "per run", "per trial", "keys added", "keys dropped", "values changed")]
        rows += [
            (
                tool.tool,
                f"{tool.calls[0]} → {tool.calls[1]}",
                f"{_mean(tool.per_run[0])} → {_mean(tool.per_run[1])}",
                f"{_mean(tool.per_trial[0])} → {_mean(tool.per_trial[1])}",
                ", ".join(tool.keys_added) or "-",
                ", ".join(tool.keys_dropped) or "-",
                str(tool.values_changed),
            )
            for tool in found.tools
        ]
        widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
        table = [
            "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        lines.append(table[0])
        for tool, line in zip(found.tools, table[1:], strict=True):
            lines.append(line)
            for change in tool.values:
                lines.append(f"    {change.task}: {change.key} {change.then} → {change.now}")
            if tool.values_changed > len(tool.values):
                lines.append(f"    … and {tool.values_changed - len(tool.values)} more")
    if found.switches:
        lines.append(f"  chosen tool changed in {count(len(found.switches), 'task')}:")
        for switch in found.switches[:SWITCHES_LISTED]:
            lines.append(f"    {switch.task}: {_tool(switch.then)} → {_tool(switch.now)}")
        if len(found.switches) > SWITCHES_LISTED:
            lines.append(f"    … and {count(len(found.switches) - SWITCHES_LISTED, 'task')} more")
    return lines


def drift_document(found: Drift) -> dict[str, Any]:
    """The drift as `compare --out` writes it."""
    return {
        "tasks": found.tasks,
        "tools": [
            {
                "tool": tool.tool,
                "calls": {"then": tool.calls[0], "now": tool.calls[1]},
                "perRun": {"then": float(tool.per_run[0]), "now": float(tool.per_run[1])},
                "perTrial": {"then": float(tool.per_trial[0]), "now": float(tool.per_trial[1])},
                "keysAdded": list(tool.keys_added),
                "keysDropped": list(tool.keys_dropped),
                "valuesChanged": tool.values_changed,
                "values": [
                    {"task": change.task, "key": change.key, "then": change.then, "now": change.now}
                    for change in tool.values
                ],
            }
            for tool in found.tools
        ],
        "chosenToolChanged": [{"task": s.task, "then": s.then, "now": s.now} for s in found.switches],
    }


def drift_markdown(found: Drift, escape: Any) -> list[str]:
    """The drift as a Markdown table for the job summary, `escape` making text safe in a cell; nothing when nothing
    drifted."""
    if not found.tools and not found.switches:
        return []
    lines = ["", "### Tool drift", "", f"Over the {count(found.tasks, 'task')} both runs ran."]
    if found.tools:
        lines += [
            "",
            "| tool | calls | per run | per trial | keys added | keys dropped | values changed |",
            "|---|---:|---:|---:|---|---|---|",
        ]
        for tool in found.tools:
            values, more = _values_shown(tool)
            lines.append(
                f"| {escape(tool.tool)} | {tool.calls[0]} → {tool.calls[1]} "
                f"| {_mean(tool.per_run[0])} → {_mean(tool.per_run[1])} "
                f"| {_mean(tool.per_trial[0])} → {_mean(tool.per_trial[1])} "
                f"| {escape(', '.join(tool.keys_added))} | {escape(', '.join(tool.keys_dropped))} "
                f"| {tool.values_changed}{': ' + escape(values) if values else ''}{more} |"
            )
    if found.switches:
        listed = found.switches[:SWITCHES_LISTED]
        lines += ["", "Chosen tool changed:", ""]
        lines += [f"- {escape(s.task)}: {escape(_tool(s.then))} → {escape(_tool(s.now))}" for s in listed]
        if len(found.switches) > len(listed):
            lines.append(f"- … and {count(len(found.switches) - len(listed), 'task')} more")
    return lines


def drift_html(found: Drift, escape: Any) -> Iterator[str]:
    """The drift as the HTML report's table, `escape` making text safe; nothing when nothing drifted."""
    if not found.tools and not found.switches:
        return
    yield f'<h3>Tool drift</h3><p class="muted">Over the {escape(count(found.tasks, "task"))} both runs ran.</p>'
    if found.tools:
        yield (
            "<table><thead><tr><th>tool</th><th>calls</th><th>per run</th><th>per trial</th><th>keys added</th>"
            "<th>keys dropped</th><th>values changed</th></tr></thead><tbody>"
        )
        for tool in found.tools:
            values, more = _values_shown(tool)
            yield (
                f'<tr><td>{escape(tool.tool)}</td><td class="n">{tool.calls[0]} → {tool.calls[1]}</td>'
                f'<td class="n">{_mean(tool.per_run[0])} → {_mean(tool.per_run[1])}</td>'
                f'<td class="n">{_mean(tool.per_trial[0])} → {_mean(tool.per_trial[1])}</td>'
                f"<td>{escape(', '.join(tool.keys_added))}</td><td>{escape(', '.join(tool.keys_dropped))}</td>"
                f"<td>{tool.values_changed}{escape(': ' + values if values else '')}{more}</td></tr>"
            )
        yield "</tbody></table>"
    if found.switches:
        yield '<p>Chosen tool changed:</p><ul class="changes">'
        yield "".join(
            f"<li><b>{escape(switch.task)}</b> {escape(_tool(switch.then))} → {escape(_tool(switch.now))}</li>"
            for switch in found.switches
        )
        yield "</ul>"


def _values_shown(tool: ToolDrift) -> tuple[str, str]:
    """The values changed shown in a report's cell, and how many more there were, said: ("", "") for none."""
    values = "; ".join(f"{c.task}: {c.key} {c.then} → {c.now}" for c in tool.values)
    hidden = tool.values_changed - len(tool.values)
    return values, f" (+{hidden} more)" if hidden > 0 else ""


def _has_calls(entry: Mapping[str, Any]) -> bool:
    return "trialCalls" in entry or "trialResults" in entry


def _trials(entry: Mapping[str, Any]) -> list[list[Mapping[str, Any]]]:
    """Each trial's calls: a running run's entry keeps only them (trialCalls), a results file's its whole trials."""
    if "trialCalls" in entry:
        return list(entry["trialCalls"])
    return [trial_calls(trial) for trial in entry["trialResults"]]


def _first_calls(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    trials = _trials(entry)
    return trials[0] if trials else []


def _value_changes(
    task: str, then: list[Mapping[str, Any]], now: list[Mapping[str, Any]]
) -> Iterator[tuple[str, ValueChange]]:
    """Each argument of a tool's first call in the task's first trial whose value differs now."""
    first_then, first_now = _first_of_each(then), _first_of_each(now)
    for tool, call in first_now.items():
        was = first_then.get(tool)
        if was is None:
            continue
        for key in sorted(set(call["args"]) & set(was["args"])):
            if not json_equal(call["args"][key], was["args"][key]):  # JSON's equality: true is not 1, as == has it
                yield tool, ValueChange(task, key, _value(was["args"][key]), _value(call["args"][key]))


def _first_of_each(calls: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    first: dict[str, Mapping[str, Any]] = {}
    for call in calls:
        first.setdefault(call["name"], call)
    return first


def _keys(calls: Iterable[Mapping[str, Any]]) -> set[str]:
    return {key for call in calls for key in call["args"]}


def _value(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False, sort_keys=True), VALUE_WIDTH)


def _mean(value: Fraction) -> str:
    return f"{float(value):.2f}".rstrip("0").rstrip(".")


def _tool(name: str | None) -> str:
    return name or "(no call)"
