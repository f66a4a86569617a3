"""Budgets: what a trial may spend (tokens, tool calls, calls of a tool, latency) and the loop rule, each with a trial
within it and one over it; the file's budget and a task's over it; blocking; the results and the reports."""

from __future__ import annotations

import json
import os
import unittest
from decimal import Decimal
from typing import Any

import junitparser

from harness.records import (
    AgentRequest,
    Budget,
    ExpectTool,
    Outcome,
    Reply,
    Step,
    Task,
    ToolCall,
    ToolResult,
    ToolScript,
    Turn,
    replace,
)
from harness.results import load_results, task_entry
from harness.running import run_task
from harness.scoring import repeated_steps, score_budget
from harness.taskfile import load_task_file
from harness.text import budget_text
from harness.verdict import Tallies, decide
from tests import test_html_report as html_report
from tests.support import (
    CANNED,
    CANONICAL_TASKS,
    ROOT,
    InProcessAgent,
    TempDirTestCase,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)

GET = ExpectTool("imageman.asset.get", ("assetId",))


def call(name: str = "imageman.asset.get", turn: int = 1, **args: object) -> ToolCall:
    return ToolCall(name, args, turn=turn)


def task(budget: Budget | None = None) -> Task:
    return Task(id="t", category="c", prompt="p", expect=GET, budget=budget)


A1, A2 = call(assetId="a1"), call(assetId="a2")
SEARCH = call("imageman.asset.search", query="x")
PASS = Outcome("pass")

# (name, budget, reply, durationMs, expected outcome of a trial otherwise passing)
CASES: list[tuple[str, Budget | None, Reply, float, Outcome]] = [
    (
        "no budget: calls alike in one reply are no loop, whatever their number",
        None,
        Reply((A1, A1, A1, A1)),
        5,
        PASS,
    ),
    ("maxRepeats null: calls alike in one reply pass too", Budget(max_repeats=None), Reply((A1,) * 9), 5, PASS),
    ("maxToolCalls: at the budget passes", Budget(max_tool_calls=2), Reply((SEARCH, A1)), 5, PASS),
    (
        "maxToolCalls: over it fails",
        Budget(max_tool_calls=2),
        Reply((SEARCH, A1, A2)),
        5,
        Outcome("fail", "budget:tool-calls", "3 tool calls, over the budget of 2"),
    ),
    (
        "maxCallsPerTool: at the budget passes",
        Budget(max_calls_per_tool={"imageman.asset.get": 2}),
        Reply((SEARCH, SEARCH, A1, A2)),
        5,
        PASS,
    ),
    (
        "maxCallsPerTool: over it fails, naming the tool and its count",
        Budget(max_calls_per_tool={"imageman.asset.search": 1, "imageman.asset.get": 1}),
        Reply((SEARCH, A1, A2)),
        5,
        Outcome("fail", "budget:tool-calls", "imageman.asset.get called 2 times, over its budget of 1"),
    ),
    ("maxTokens: at the budget passes", Budget(max_tokens=1500), Reply((A1,), usage=(1000, 500)), 5, PASS),
    (
        "maxTokens: input and output over it fail",
        Budget(max_tokens=1500),
        Reply((A1,), usage=(1500, 334)),
        5,
        Outcome("fail", "budget:tokens", "1,834 tokens, over the budget of 1,500"),
    ),
    (
        "maxTokens: tokens no one reported are an error, never a pass",
        Budget(max_tokens=1500),
        Reply((A1,)),
        5,
        Outcome(
            "error",
            "budget:no-usage",
            "the agent reported no token usage, so the budget of 1,500 tokens cannot be checked",
        ),
    ),
    ("maxLatencyMs: at the budget passes", Budget(max_latency_ms=2000), Reply((A1,)), 2000, PASS),
    (
        "maxLatencyMs: over it fails",
        Budget(max_latency_ms=2000),
        Reply((A1,)),
        2345.4,
        Outcome("fail", "budget:latency", "2,345.4 ms, over the budget of 2,000 ms"),
    ),
    (
        "maxLatencyMs: a trial whose durationMs (to 0.1 ms) is the budget passes",
        Budget(max_latency_ms=1000),
        Reply((A1,)),
        1000.04,
        PASS,
    ),
    (
        "maxLatencyMs: a million ms and more said whole",
        Budget(max_latency_ms=1234567),
        Reply((A1,)),
        1234567.8,
        Outcome("fail", "budget:latency", "1,234,567.8 ms, over the budget of 1,234,567 ms"),
    ),
    (
        "maxLatencyMs: under a millisecond",
        Budget(max_latency_ms=0.5),
        Reply((A1,)),
        0.64,
        Outcome("fail", "budget:latency", "0.6 ms, over the budget of 0.5 ms"),
    ),
]


class Scoring(unittest.TestCase):
    def test_each_budget_passes_a_trial_within_it_and_fails_one_over_it(self) -> None:
        for name, budget, reply, duration_ms, expected in CASES:
            with self.subTest(name):
                self.assertEqual(score_budget(task(budget), PASS, reply, duration_ms), expected)

    def test_a_latency_budget_is_said_as_written(self) -> None:
        self.assertEqual(budget_text({"maxLatencyMs": 1234567, "blocking": False}), "at most 1,234,567 ms")
        self.assertEqual(budget_text({"maxLatencyMs": 2500.5, "blocking": False}), "at most 2,500.5 ms")

    def test_a_budget_of_one_is_said_in_the_singular(self) -> None:
        budget = {"maxTokens": 1, "maxToolCalls": 1, "maxCallsPerTool": {"t": 1}, "blocking": False}
        self.assertEqual(budget_text(budget), "at most 1 token, 1 tool call, 1 call of t")
        self.assertEqual(budget_text({"maxTokens": 1500, "blocking": False}), "at most 1,500 tokens")

    def test_a_trial_that_failed_or_erred_keeps_its_own_verdict(self) -> None:
        budget = Budget(max_tool_calls=1, max_tokens=1, max_latency_ms=1)
        for outcome in (Outcome("fail", "tool:wrong-name", "expected a, got b"), Outcome("error", "reply:timeout")):
            with self.subTest(outcome.code):
                self.assertEqual(score_budget(task(budget), outcome, Reply((A1, A1, A1)), 9000), outcome)

    def test_tokens_some_steps_did_not_report_are_an_error_never_a_pass(self) -> None:
        steps = (Step(Reply((A1,), usage=(100, 20))), Step(Reply(text="done")))
        reply = Reply((A1,), text="done", usage=(100, 20))
        outcome = score_budget(task(Budget(max_tokens=1500)), PASS, reply, 5, (Turn("p", steps),))
        self.assertEqual(
            outcome,
            Outcome(
                "error",
                "budget:no-usage",
                "the agent reported no token usage for 1 of its 2 steps, so the budget of 1,500 tokens cannot be"
                " checked",
            ),
        )
        reported = (Turn("p", (steps[0], Step(Reply(text="done", usage=(130, 5))))),)
        self.assertEqual(score_budget(task(Budget(max_tokens=1500)), PASS, reply, 5, reported), PASS)


def step(*played: tuple[ToolCall, Any]) -> Step:
    """A step whose reply made these calls and got these results back."""
    return Step(Reply(tuple(call for call, _ in played)), tuple(ToolResult(call, result) for call, result in played))


PENDING, DONE = {"status": "pending"}, {"status": "done"}
LOOP_3 = (
    'the same calls with the same results in 3 steps in a row in turn 1: imageman.asset.get({"assetId": "a1"})'
    " (maxRepeats 3)"
)
# (name, the turn's steps so far, maxRepeats, why they are a loop or None)
LOOPS: list[tuple[str, tuple[Step, ...], int, str | None]] = [
    ("two steps alike are no loop", (step((A1, PENDING)),) * 2, 3, None),
    ("three steps alike, the same call and the same result, are a loop", (step((A1, PENDING)),) * 3, 3, LOOP_3),
    (
        "polling: the same call whose result changed is progress",
        (step((A1, PENDING)), step((A1, PENDING)), step((A1, DONE))),
        3,
        None,
    ),
    ("three calls alike in one step are no loop", (step((A1, PENDING), (A1, PENDING), (A1, PENDING)),), 3, None),
    (
        "steps of the same parallel calls in any order, each with its same result, are a loop",
        (step((A1, PENDING), (SEARCH, DONE)), step((SEARCH, DONE), (A1, PENDING)), step((A1, PENDING), (SEARCH, DONE))),
        3,
        'the same calls with the same results in 3 steps in a row in turn 1: imageman.asset.get({"assetId": "a1"}),'
        ' imageman.asset.search({"query": "x"}) (maxRepeats 3)',
    ),
    (
        "a step with one call more is another step",
        (step((A1, PENDING)), step((A1, PENDING), (A1, PENDING)), step((A1, PENDING))),
        3,
        None,
    ),
    (
        "another call between breaks the row",
        (step((A1, PENDING)),) * 2 + (step((A2, PENDING)), step((A1, PENDING))),
        3,
        None,
    ),
    (
        "arguments equal as JSON (25 and 25.0, keys in another order) are the same call",
        (
            step((call(assetId="a1", limit=25), PENDING)),
            step((call(limit=25.0, assetId="a1"), PENDING)),
            step((call(assetId="a1", limit=25), PENDING)),
        ),
        3,
        'the same calls with the same results in 3 steps in a row in turn 1: imageman.asset.get({"assetId": "a1",'
        ' "limit": 25}) (maxRepeats 3)',
    ),
    (
        "true is not 1",
        (step((call(x=True), PENDING)), step((call(x=1), PENDING)), step((call(x=True), PENDING))),
        3,
        None,
    ),
    (
        "results equal as JSON are the same",
        (step((A1, {"n": 1})), step((A1, {"n": 1.0})), step((A1, {"n": 1}))),
        3,
        LOOP_3,
    ),
    ("maxRepeats 4: three steps alike pass", (step((A1, PENDING)),) * 3, 4, None),
    (
        "maxRepeats 4: four steps alike are a loop",
        (step((A1, PENDING)),) * 4,
        4,
        LOOP_3.replace("3 steps", "4 steps").replace("maxRepeats 3", "maxRepeats 4"),
    ),
    ("a step with no call ends the turn, and is no loop", (step(),) * 3, 3, None),
]


class Loops(unittest.TestCase):
    def test_a_loop_is_steps_in_a_row_of_the_same_calls_with_the_same_results(self) -> None:
        for name, steps, repeats, expected in LOOPS:
            with self.subTest(name):
                self.assertEqual(repeated_steps(steps, repeats, 1), expected)


class StepByStep(InProcessAgent):
    """A model that calls imageman.asset.get for a1 in each of its first three steps, then answers."""

    def run(self, request: AgentRequest) -> Reply:
        return Reply((call(assetId="a1"),)) if len(request.steps) < 3 else Reply(text="ast_1 is 2 MB.")


class Conversation(unittest.TestCase):
    def test_the_same_call_with_the_same_result_in_three_steps_of_a_turn_stops_it_as_a_loop(self) -> None:
        scripted = replace(task(), tool_results={"imageman.asset.get": ToolScript(({"size": "2 MB"},))})
        result = run_task(StepByStep(), scripted)
        self.assertEqual(
            (result.outcome.code, result.outcome.reason, len(result.turns[0].steps)),
            (
                "conversation:loop",
                'the same calls with the same results in 3 steps in a row in turn 1: imageman.asset.get({"assetId":'
                ' "a1"}) (maxRepeats 3)',
                3,
            ),
        )
        allowed = run_task(StepByStep(), replace(scripted, budget=Budget(max_repeats=4)))
        self.assertEqual((allowed.outcome, len(allowed.turns[0].steps)), (PASS, 4))
        off = run_task(StepByStep(), replace(scripted, budget=Budget(max_repeats=None)))
        self.assertEqual(off.outcome, PASS)

    def test_three_calls_alike_in_one_reply_of_an_agent_that_runs_its_own_tools_pass(self) -> None:
        class Reports(InProcessAgent):
            PLAYS_TOOLS = False

            def run(self, request: AgentRequest) -> Reply:
                return Reply((call(assetId="a1"),) * 3)

        self.assertEqual(run_task(Reports(), task()).outcome, PASS)


def entry_of(code: str | None, *, blocking: bool, budget_blocks: bool | None) -> dict[str, Any]:
    budget = {} if budget_blocks is None else {"budget": {"maxToolCalls": 1, "blocking": budget_blocks}}
    trial = {"status": "pass" if code is None else "fail", "code": code, "usage": None, "durationMs": 1.0}
    return {"id": "t", "category": "c", "blocking": blocking, "violation": None, "trialResults": [trial], **budget}


class Blocking(unittest.TestCase):
    def decided(self, *entries: dict[str, Any]) -> Any:
        tallies = Tallies()
        for entry in entries:
            tallies.add(entry)
        return decide(tallies, Decimal(0))

    def test_a_budget_breach_of_a_blocking_task_counts_but_does_not_block(self) -> None:
        summary = self.decided(entry_of("budget:tool-calls", blocking=True, budget_blocks=False))
        self.assertEqual((summary.failed, summary.over_budget, summary.blocking_failed), (1, 1, ()))
        self.assertTrue(summary.gate_passed)

    def test_a_loop_of_a_blocking_task_blocks_as_a_conversation_maxsteps_stopped_does(self) -> None:
        for budget_blocks in (None, False):
            for code in ("conversation:loop", "conversation:max-steps"):
                with self.subTest(code, budget_blocks=budget_blocks):
                    summary = self.decided(entry_of(code, blocking=True, budget_blocks=budget_blocks))
                    self.assertEqual((summary.failed, summary.over_budget, summary.blocking_failed), (1, 0, ("t",)))

    def test_a_budget_that_says_blocking_blocks(self) -> None:
        summary = self.decided(entry_of("budget:tool-calls", blocking=True, budget_blocks=True))
        self.assertEqual((summary.blocking_failed, summary.gate_failed_because), (("t",), ("blocking-failed",)))

    def test_a_blocking_task_that_fails_otherwise_blocks_whatever_its_budget(self) -> None:
        summary = self.decided(entry_of("tool:wrong-name", blocking=True, budget_blocks=False))
        self.assertEqual((summary.blocking_failed, summary.over_budget), (("t",), 0))


BUDGET_FILE = os.path.join(os.path.dirname(__file__), "data", "tasks", "valid", "budgets.json")


class TaskFile(unittest.TestCase):
    def test_a_tasks_budget_overrides_the_files_key_by_key(self) -> None:
        shared, own, turned_off = load_task_file(BUDGET_FILE).tasks[:3]
        self.assertEqual(
            shared.budget,
            Budget(max_tool_calls=1, max_calls_per_tool={"imageman.asset.get": 1}, max_latency_ms=5000.0),
        )
        self.assertEqual(
            own.budget,
            Budget(
                max_tokens=1500, max_tool_calls=3, max_calls_per_tool={"imageman.asset.get": 1}, max_latency_ms=5000
            ),
        )
        self.assertEqual(
            turned_off.budget,
            Budget(
                max_tool_calls=1,
                max_calls_per_tool={"imageman.asset.get": 1},
                max_latency_ms=5000,
                max_repeats=None,
                blocking=True,
            ),
        )

    def test_a_tasks_hash_covers_its_budget_and_tasks_without_one_keep_theirs(self) -> None:
        data = canonical_task_data()
        plain = {task.id: task.sha256 for task in load_task_file(CANONICAL_TASKS).tasks}
        data["tasks"][0]["expect"]["budget"] = {"maxToolCalls": 2}
        hashes = self.hashes(data)
        self.assertNotEqual(hashes[data["tasks"][0]["id"]], plain[data["tasks"][0]["id"]])
        self.assertEqual(
            {key: value for key, value in hashes.items() if key != data["tasks"][0]["id"]},
            {key: value for key, value in plain.items() if key != data["tasks"][0]["id"]},
        )
        # The same budget given by the file: the same task, the same hash.
        del data["tasks"][0]["expect"]["budget"]
        data["budget"] = {"maxToolCalls": 2}
        self.assertEqual(self.hashes(data)[data["tasks"][0]["id"]], hashes[data["tasks"][0]["id"]])

    def hashes(self, data: dict[str, Any]) -> dict[str, str]:
        from harness.taskfile import parse_task_file

        task_file, problems = parse_task_file(json.dumps(data).encode(), "tasks.json", {})
        assert task_file is not None, problems
        return {task.id: task.sha256 for task in task_file.tasks}


class Results(unittest.TestCase):
    def test_a_task_entry_records_its_budget_and_one_without_records_none(self) -> None:
        from harness.records import Result

        trial = Result(task(Budget(max_tool_calls=2, max_repeats=None)), Reply((A1,)), PASS, 3.0)
        self.assertEqual(
            task_entry(trial.task, [trial])["budget"], {"maxToolCalls": 2, "maxRepeats": None, "blocking": False}
        )
        plain = Result(task(), Reply((A1,)), PASS, 3.0)
        self.assertNotIn("budget", task_entry(plain.task, [plain]))


GET_ONE = {"name": "imageman.asset.get", "args": {"assetId": "ast_7f3k2p9q"}}
GET_TWO = {"name": "imageman.asset.get", "args": {"assetId": "ast_91c2"}}
REPORTS = ("--junit", "junit.xml", "--summary-md", "summary.md", "--html", "page.html")


def budget_run(case: TempDirTestCase) -> tuple[str, str, int]:
    """The canonical tasks under a file's budget of one imageman.asset.get call, with every report: the agent calls
    it twice more in asset-search-by-tag (whose own budget allows two), asset-get-details (blocking, the file's
    budget) and transform-bg-remove (blocking, its budget blocking too)."""
    data = canonical_task_data()
    data["budget"] = {"maxCallsPerTool": {"imageman.asset.get": 1}}
    search, get, bg_remove = data["tasks"][0], data["tasks"][2], data["tasks"][6]
    search["expect"]["budget"] = {"maxCallsPerTool": {"imageman.asset.get": 2}}
    get["blocking"] = bg_remove["blocking"] = True
    bg_remove["expect"]["budget"] = {"blocking": True}
    extra = {task["id"] for task in (search, get, bg_remove)}

    def respond(received: Any, handler: Any) -> None:
        reply = CANNED[received.json["prompt"]]
        if received.json["taskId"] in extra:
            reply = {"toolCalls": [reply["toolCall"], GET_ONE, GET_TWO]}
        send_json(handler, reply)

    env = clean_env(EVAL_AGENT_URL=case.serve(respond).url())
    return run_cli("--tasks", case.write_json("t.json", data), *REPORTS, env=env, cwd=case.tmp)


class Run(TempDirTestCase):
    def test_the_files_budget_applies_a_tasks_overrides_it_and_only_a_blocking_budget_blocks(self) -> None:
        stdout, stderr, code = budget_run(self)
        self.assertEqual((code, stderr), (1, ""))
        self.assertIn(
            "FAIL  asset-get-details            imageman.asset.get(assetId); imageman.asset.get(assetId);"
            " imageman.asset.get(assetId)  ",
            stdout,
        )
        self.assertIn("budget:tool-calls: imageman.asset.get called 3 times, over its budget of 1", stdout)
        self.assertEqual(
            stdout.splitlines()[-1],
            "8/10 PASS at 80% (gate 80%) · 2 failed · 2 over budget · gate not met: blocking task failed"
            " (transform-bg-remove)",
        )
        doc = self.read_json("eval-results.json")
        by_id = {entry["id"]: entry for entry in doc["results"]}
        ids = ("asset-search-by-tag", "asset-get-details", "transform-bg-remove")
        self.assertEqual(
            [(by_id[task_id]["status"], by_id[task_id]["code"]) for task_id in ids],
            [("pass", None), ("fail", "budget:tool-calls"), ("fail", "budget:tool-calls")],
        )
        self.assertEqual(
            [by_id[task_id]["budget"] for task_id in ids],
            [
                {"maxCallsPerTool": {"imageman.asset.get": 2}, "blocking": False},
                {"maxCallsPerTool": {"imageman.asset.get": 1}, "blocking": False},
                {"maxCallsPerTool": {"imageman.asset.get": 1}, "blocking": True},
            ],
        )
        self.assertEqual((doc["blockingFailed"], doc["overBudget"]), (["transform-bg-remove"], 2))
        self.assertEqual(load_results(os.path.join(self.tmp, "eval-results.json"))["overBudget"], 2)

        suite = next(iter(junitparser.JUnitXml.fromfile(os.path.join(self.tmp, "junit.xml"))))
        self.assertEqual({p.name: p.value for p in suite.properties()}["overBudget"], "2")
        case = next(case for case in suite if case.name == "asset-get-details")
        self.assertIsInstance(case.result[0], junitparser.Failure)
        self.assertEqual(case.result[0].type, "budget:tool-calls")
        self.assertIn("budget: at most 1 call of imageman.asset.get\n", case.result[0].text + "\n")

        with open(os.path.join(self.tmp, "summary.md"), encoding="utf-8") as f:
            summary = f.read()
        self.assertIn("**Over budget**: 2 of 10 trials did what their task asks but broke its budget", summary)
        self.assertIn("  - budget: at most 1 call of imageman.asset.get; blocking\n", summary)

    def test_an_http_agent_that_reports_its_tokens_is_held_to_a_token_budget(self) -> None:
        data = canonical_task_data()
        data["budget"] = {"maxTokens": 1000}
        spendthrift = data["tasks"][1]["id"]

        def respond(received: Any, handler: Any) -> None:
            spent = 990 if received.json["taskId"] == spendthrift else 40
            send_json(handler, {**CANNED[received.json["prompt"]], "usage": {"inputTokens": spent, "outputTokens": 20}})

        env = clean_env(EVAL_AGENT_URL=self.serve(respond).url())
        stdout, stderr, code = run_cli("--tasks", self.write_json("t.json", data), env=env, cwd=self.tmp)
        self.assertIn("budget:tokens: 1,010 tokens, over the budget of 1,000", stdout)
        doc = self.read_json("eval-results.json")
        codes = {entry["id"]: entry["code"] for entry in doc["results"]}
        self.assertEqual(
            (code, {t: c for t, c in codes.items() if c}, doc["usage"]["inputTokens"]),
            (0, {spendthrift: "budget:tokens"}, 40 * (len(codes) - 1) + 990),
            stderr,
        )
        self.assertEqual(
            next(e for e in doc["results"] if e["id"] == spendthrift)["trialResults"][0]["usage"],
            {"inputTokens": 990, "outputTokens": 20},
        )

    def test_a_dry_run_says_each_tasks_budget(self) -> None:
        stdout, _, code = run_cli("--dry-run", "--tasks", BUDGET_FILE, cwd=self.tmp)
        self.assertEqual(code, 0)
        self.assertIn(
            "asset-search-by-tag    asset.search  expects imageman.asset.search(tags), budget: at most 1,500 tokens,"
            " 3 tool calls, 1 call of imageman.asset.get, 5,000 ms",
            stdout,
        )
        self.assertIn(
            "budget: at most 1 tool call, 1 call of imageman.asset.get, 5,000 ms; no loop checked; blocking", stdout
        )


def polling_task(results: Any, budget: dict[str, Any] | None = None) -> dict[str, Any]:
    """A task whose trajectory asks for a render job's status three times, with these results scripted for it."""
    step = {"tool": "imageman.asset.get", "argValues": {"assetId": ["job_1"]}}
    expect: dict[str, Any] = {"trajectory": [step] * 3, "order": "exact"}
    return {
        "id": "render-polled",
        "category": "asset.get",
        "prompt": "Tell me when the render job_1 is done.",
        "toolResults": {"imageman.asset.get": results},
        "expect": {**expect, "budget": budget} if budget is not None else expect,
    }


def polled_in_turn_2(results: Any) -> dict[str, Any]:
    """The polling task, its three calls asked for by its second turn's own expectation."""
    task = polling_task(results)
    trajectory = task.pop("expect")
    return {
        **task,
        "turns": [{"prompt": "Is it done yet?", "expect": trajectory}],
        "expect": {"tool": "imageman.asset.get"},
    }


class Validate(TempDirTestCase):
    def test_validate_warns_where_a_tasks_own_expected_trajectory_would_be_stopped_as_a_loop(self) -> None:
        from harness.subcommands.validate import self_loops

        loop = (
            "render-polled: made one step at a time, its expected trajectory is a loop: the same calls with the same"
            ' results in 3 steps in a row in turn 1: imageman.asset.get({"assetId": "job_1"}) (maxRepeats 3); script'
            " results that change (a sequence), or raise maxRepeats"
        )
        cases = [
            ("one result for every call", polling_task(PENDING), [loop]),
            ("a sequence that changes", polling_task({"sequence": [PENDING, PENDING, DONE]}), []),
            ("a sequence whose last repeats", polling_task({"sequence": [PENDING]}), [loop]),
            ("maxRepeats 4", polling_task(PENDING, {"maxRepeats": 4}), []),
            ("maxRepeats null", polling_task(PENDING, {"maxRepeats": None}), []),
            ("in a turn's own expectation", polled_in_turn_2(PENDING), [loop.replace("turn 1", "turn 2")]),
            ("in a turn's own, changing", polled_in_turn_2({"sequence": [PENDING, PENDING, DONE]}), []),
        ]
        for name, data, expected in cases:
            with self.subTest(name):
                tasks = canonical_task_data()
                tasks["tasks"] = [data]
                self.assertEqual(self_loops(load_task_file(self.write_json("t.json", tasks), {})), expected)
        tasks = canonical_task_data()
        tasks["tasks"].append(polling_task(PENDING))
        stdout, stderr, code = run_cli("validate", "--tasks", self.write_json("t.json", tasks), cwd=self.tmp)
        self.assertEqual((code, stderr), (0, ""))
        self.assertIn(f"\nwarning: {loop}\n", stdout)


class InBrowser(TempDirTestCase):
    """The page of the budget run, opened in headless Chromium as tests.test_html_report opens its pages."""

    setUpClass = classmethod(html_report.InBrowser.setUpClass.__func__)  # type: ignore[attr-defined]
    tearDownClass = classmethod(html_report.InBrowser.tearDownClass.__func__)  # type: ignore[attr-defined]
    open = html_report.InBrowser.open
    text_of = html_report.InBrowser.text_of
    assert_quiet = html_report.InBrowser.assert_quiet

    def test_the_page_counts_the_trials_over_budget_and_shows_each_tasks_budget(self) -> None:
        budget_run(self)
        page = self.open("page.html")
        self.assertIn("8 passed · 2 failed · 0 errors · 2 over budget", page.inner_text("#verdict"))
        row = self.text_of(page, "#task-2")
        self.assertIn("budget:tool-calls: imageman.asset.get called 3 times, over its budget of 1", row)
        self.assertIn("over budget", row)
        self.assertNotIn("over budget", self.text_of(page, "#task-0"))
        page.click("#task-2 summary")
        self.assertEqual(page.inner_text("#task-2 .budget"), "at most 1 call of imageman.asset.get")
        self.assert_quiet()


class Docs(TempDirTestCase):
    def test_the_guides_example_loads_with_the_budgets_it_says(self) -> None:
        with open(os.path.join(ROOT, "docs", "tasks.md"), encoding="utf-8") as f:
            guide = f.read().split("\n## Budgets\n", 1)[1]
        example = guide.split("```json\n", 1)[1].split("```", 1)[0]
        find_summer, hero_details = load_task_file(self.write_json("t.json", json.loads(example))).tasks
        self.assertEqual(
            find_summer.budget,
            Budget(max_tool_calls=1, max_calls_per_tool={"imageman.asset.get": 2}, max_latency_ms=20000),
        )
        self.assertEqual(
            hero_details.budget,
            Budget(
                max_tokens=3000,
                max_tool_calls=4,
                max_calls_per_tool={"imageman.asset.get": 2},
                max_latency_ms=20000,
                blocking=True,
            ),
        )
