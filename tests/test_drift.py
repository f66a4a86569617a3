"""Per-tool drift in compare: two real runs of the CLI against scripted models that differ in their calls."""

from __future__ import annotations

import copy
import json
import os
import unittest
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.drift import VALUE_EXAMPLES, drift, drift_lines
from tests.support import CANNED, Received, TempDirTestCase, canned, clean_env, run_cli, send_json

# The candidate model, task by task: what it does differently from the stub's canned replies.
CANDIDATE = {
    # A tool called more: the same lookup twice.
    "asset-get-details": lambda reply: {"toolCalls": [reply["toolCall"], reply["toolCall"]]},
    # An argument key added (cursor) and one dropped (order), and a value changed (limit 20 -> 50).
    "asset-list-recent-in-folder": lambda reply: {
        "toolCall": {
            "name": "imageman.asset.list",
            "args": {**{k: v for k, v in reply["toolCall"]["args"].items() if k != "order"}, "limit": 50, "cursor": ""},
        }
    },
    # The chosen tool changed: a URL transform where the background removal was asked for.
    "transform-bg-remove": lambda reply: {
        "toolCall": {"name": "imageman.transform.url", "args": {"assetId": reply["toolCall"]["args"]["assetId"]}}
    },
}
TASKS = ["asset-get-details", "asset-list-recent-in-folder", "transform-bg-remove", "asset-search-by-tag"]


def candidate_model(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """The stub's replies, but for the tasks in CANDIDATE, which it answers its own way."""
    change = CANDIDATE.get(received.json["taskId"])
    if change is None:
        canned(received, handler)
    else:
        send_json(handler, change(copy.deepcopy(CANNED[received.json["prompt"]])))


class ToolDriftInCompare(TempDirTestCase):
    def runs(self, respond: Any, out: str, runs: str) -> None:
        env = clean_env(EVAL_AGENT_URL=self.serve(respond).url(), EVAL_CONCURRENCY="1")
        args = [arg for task in TASKS for arg in ("--task", task)]
        _, err, code = run_cli("--runs", runs, *args, "--out", out, env=env, cwd=self.tmp)
        self.assertIn(code, (0, 1), err)

    def test_two_models_compared_show_each_tool_called_more_its_keys_and_values_changed_and_each_task_switched(
        self,
    ) -> None:
        self.runs(canned, "base.json", "1")
        self.runs(candidate_model, "cand.json", "2")
        out, err, code = run_cli("compare", "base.json", "cand.json", "--out", "cmp.json", cwd=self.tmp)
        self.assertIn(code, (0, 1), err)
        section = out[out.index("Tool drift") :].splitlines()
        self.assertEqual(
            section,
            [
                "Tool drift (over the 4 tasks both runs ran; per trial: calls over trials)",
                "  tool                         calls  per run  per trial    keys added  keys dropped  values changed",
                "  imageman.asset.get           1 → 4  1 → 2    0.25 → 0.5   -           -             0",
                "  imageman.asset.list          1 → 2  1 → 1    0.25 → 0.25  cursor      order         1",
                "    asset-list-recent-in-folder: limit 20 → 50",
                "  imageman.transform.bgRemove  1 → 0  1 → 0    0.25 → 0     -           -             0",
                "  imageman.transform.url       0 → 2  0 → 1    0 → 0.25     -           -             0",
                "  chosen tool changed in 1 task:",
                "    transform-bg-remove: imageman.transform.bgRemove → imageman.transform.url",
            ],
        )
        with open(os.path.join(self.tmp, "cmp.json"), encoding="utf-8") as f:
            document = json.load(f)["toolDrift"]
        listed = {tool["tool"]: tool for tool in document["tools"]}
        self.assertEqual(listed["imageman.asset.get"]["perTrial"], {"then": 0.25, "now": 0.5})
        self.assertEqual(listed["imageman.asset.get"]["perRun"], {"then": 1.0, "now": 2.0})
        self.assertEqual(
            (listed["imageman.asset.list"]["keysAdded"], listed["imageman.asset.list"]["keysDropped"]),
            (["cursor"], ["order"]),
        )
        self.assertEqual(
            listed["imageman.asset.list"]["values"],
            [{"task": "asset-list-recent-in-folder", "key": "limit", "then": "20", "now": "50"}],
        )
        self.assertEqual(
            document["chosenToolChanged"],
            [{"task": "transform-bg-remove", "then": "imageman.transform.bgRemove", "now": "imageman.transform.url"}],
        )

    def test_two_runs_of_one_model_at_different_runs_show_no_drift(self) -> None:
        self.runs(canned, "base.json", "1")
        self.runs(canned, "again.json", "3")
        out, err, code = run_cli("compare", "base.json", "again.json", "--out", "cmp.json", cwd=self.tmp)
        self.assertEqual(code, 0, err)
        self.assertNotIn("Tool drift", out)
        with open(os.path.join(self.tmp, "cmp.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["toolDrift"], {"tasks": 4, "tools": [], "chosenToolChanged": []})

    def test_the_job_summary_and_the_html_report_against_a_baseline_show_the_drift(self) -> None:
        self.runs(canned, "base.json", "1")
        env = clean_env(
            EVAL_AGENT_URL=self.serve(candidate_model).url(),
            EVAL_CONCURRENCY="1",
            GITHUB_STEP_SUMMARY=os.path.join(self.tmp, "summary.md"),
        )
        args = [arg for task in TASKS for arg in ("--task", task)]
        out, err, _ = run_cli("--baseline", "base.json", *args, "--out", "cand.json", env=env, cwd=self.tmp)
        self.assertIn("    asset-list-recent-in-folder: limit 20 → 50", (out + err).splitlines())
        with open(os.path.join(self.tmp, "summary.md"), encoding="utf-8") as f:
            summary = f.read()
        self.assertIn("### Tool drift", summary, err)
        self.assertIn(
            "| imageman.asset.list | 1 → 1 | 1 → 1 | 0.25 → 0.25 | cursor | order "
            "| 1: asset-list-recent-in-folder: limit 20 → 50 |",
            summary,
        )
        self.assertIn("- transform-bg-remove: imageman.transform.bgRemove → imageman.transform.url", summary)
        _, err, code = run_cli("report", "cand.json", "--baseline", "base.json", "-o", "page.html", cwd=self.tmp)
        self.assertEqual(code, 0, err)
        with open(os.path.join(self.tmp, "page.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("<h3>Tool drift</h3>", page)
        self.assertIn("<td>cursor</td><td>order</td><td>1: asset-list-recent-in-folder: limit 20 → 50</td>", page)


def conversation_entry(task_id: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A task's entry whose one trial is a conversation of a step per call (its own toolCalls the last step's)."""
    steps = [{"toolCalls": [call]} for call in calls]
    trial = {"toolCalls": calls[-1:], "conversation": [{"user": "hi", "steps": steps}]}
    return {"id": task_id, "trialResults": [trial]}


class DriftOfCalls(unittest.TestCase):
    def test_a_conversations_steps_are_its_calls_and_values_are_clipped_and_a_few_shown_per_tool(self) -> None:
        search = {"name": "search", "args": {"query": "a"}}
        then = [conversation_entry(f"t{i}", [search, {"name": "get", "args": {"id": "x"}}]) for i in range(5)]
        now = [conversation_entry(f"t{i}", [search, {"name": "get", "args": {"id": "y" * 100}}]) for i in range(5)]
        found = drift({"runs": 1, "results": then}, {"runs": 1, "results": now})
        (get,) = found.tools
        self.assertEqual((get.tool, get.calls, get.values_changed, len(get.values)), ("get", (5, 5), 5, VALUE_EXAMPLES))
        self.assertEqual(get.values[0].now, '"' + "y" * 36 + "...")
        self.assertEqual(found.switches, ())
        self.assertIn("    … and 2 more", drift_lines(found))
