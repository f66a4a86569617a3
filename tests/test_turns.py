"""Turns with expectations of their own: per-turn expect and noCall, expect.firstTurn, a task's tools and a turn's
addTools; each turn judged on its own calls, each turn's verdict kept."""

from __future__ import annotations

from typing import Any

from backends.stub import StubBackend
from harness.records import ExpectNoCall, Outcome, Task
from harness.results import task_entry
from harness.running import run_task
from harness.taskfile import load_task_file
from tests.support import TempDirTestCase, canonical_task_data

SEARCH, TAG, GET = "imageman.asset.search", "imageman.asset.tag", "imageman.asset.get"
FIND, SAY, TAG_THEM = "Find the launch photos.", "What did you find?", "Tag them approved."
SEARCHES = {"toolCall": {"name": SEARCH, "args": {"query": "launch"}}}
TAGS = {"toolCall": {"name": TAG, "args": {"assetIds": ["ast_1"], "tags": ["approved"]}}}
DONE = {"text": "Done."}


def tidy(**task: Any) -> dict[str, Any]:
    """Search in turn 1 with the search tool alone; answer turn 2 without a call; search and tag in turn 3, given the
    tag tool then."""
    return {
        "id": "tidy",
        "category": "asset.tag",
        "prompt": FIND,
        "tools": [SEARCH],
        "turns": [
            {"prompt": SAY, "expect": {"noCall": True}},
            {"prompt": TAG_THEM, "addTools": [TAG], "expect": {"trajectory": [SEARCH, TAG], "order": "exact"}},
        ],
        "expect": {"trajectory": [SEARCH, TAG], "firstTurn": {"tool": SEARCH}},
        **task,
    }


class Loading(TempDirTestCase):
    def load(self, *tasks: dict[str, Any]) -> tuple[Task, ...]:
        data = canonical_task_data()
        data["tasks"] = list(tasks)
        return load_task_file(self.write_json("tasks.json", data), {}).tasks

    def test_turn_objects_load_with_their_expectations_and_the_tools_of_each_turn(self) -> None:
        (task,) = self.load(tidy())
        self.assertEqual(task.turns, (SAY, TAG_THEM))
        first, second, third = task.turn_expects
        self.assertEqual((first.describe(), second), ("imageman.asset.search()", ExpectNoCall()))
        self.assertEqual(third.describe(), "exactly imageman.asset.search(), then imageman.asset.tag()")
        self.assertEqual(task.offered, ((SEARCH,), (SEARCH,), (SEARCH, TAG)))
        self.assertEqual(task.expect.describe(), "imageman.asset.search(), then imageman.asset.tag()")

    def test_a_task_without_the_new_keys_is_as_it_was(self) -> None:
        plain = {"id": "p", "category": "c", "prompt": FIND, "turns": [SAY], "expect": {"tool": SEARCH}}
        (task,) = self.load(plain)
        self.assertEqual((task.turns, task.turn_expects, task.offered), ((SAY,), (), ()))

    def test_string_turns_and_turn_objects_mix_and_a_turn_may_have_no_expect(self) -> None:
        (task,) = self.load(tidy(turns=[SAY, {"prompt": TAG_THEM, "addTools": [TAG]}], expect={"tool": TAG}))
        self.assertEqual((task.turns, task.turn_expects), ((SAY, TAG_THEM), ()))
        self.assertEqual(task.offered, ((SEARCH,), (SEARCH,), (SEARCH, TAG)))

    def test_the_new_keys_change_the_hash_and_an_empty_tools_offers_none(self) -> None:
        plain = {"id": "p", "category": "c", "prompt": FIND, "expect": {"tool": SEARCH}}
        (before,) = self.load(plain)
        (narrowed,) = self.load({**plain, "tools": [SEARCH]})
        self.assertNotEqual(before.sha256, narrowed.sha256)
        (none,) = self.load({**plain, "tools": [], "turns": [{"prompt": SAY, "addTools": [SEARCH]}]})
        self.assertEqual(none.offered, ((), (SEARCH,)))


class PerTurnJudging(TempDirTestCase):
    """Each turn judged on its own calls, through the real stub playing a model turn by turn."""

    def run_tidy(self, replies: dict[str, Any], **task: Any) -> tuple[Outcome, list[Any]]:
        data = canonical_task_data()
        data["tasks"] = [tidy(**task)]
        (loaded,) = load_task_file(self.write_json("tasks.json", data), {}).tasks
        stub = StubBackend(replies_path=self.write_json("replies.json", replies))
        result = run_task(stub, loaded)
        entry = task_entry(loaded, [result])["trialResults"][0]
        outcome = result.outcome
        self.assertEqual(
            (entry["status"], entry["code"], entry["reason"]), (outcome.status, outcome.code, outcome.reason)
        )
        return result.outcome, [turn.get("verdict") for turn in entry["conversation"]]

    def test_each_turn_and_the_task_hold_or_the_reason_names_the_turn(self) -> None:
        good = {FIND: [SEARCHES, DONE], SAY: {"text": "Two photos."}, TAG_THEM: [SEARCHES, TAGS, DONE]}
        passed = {"status": "pass", "code": None, "reason": None}
        cases = [
            ("every turn as expected", good, Outcome("pass"), [passed, passed, passed]),
            (
                "a call in the noCall turn",
                {**good, SAY: [SEARCHES, {"text": "Two photos."}]},
                Outcome("fail", "turn:called-tool", f"turn 2: expected no tool call, got {SEARCH}"),
                [
                    passed,
                    {"status": "fail", "code": "turn:called-tool", "reason": f"expected no tool call, got {SEARCH}"},
                    passed,
                ],
            ),
            (
                "order is per turn: the search of turn 1 is not turn 3's",
                {**good, TAG_THEM: [TAGS, DONE]},
                Outcome(
                    "fail",
                    "trajectory:length",
                    f"turn 3: expected exactly 2 calls ({SEARCH}, {TAG}), got 1 ({TAG})",
                ),
                None,
            ),
            (
                "the first turn's expectation is expect.firstTurn",
                {**good, FIND: {"text": "Which photos?"}},
                Outcome("fail", "tool:no-call", f"turn 1: expected {SEARCH}, got no tool call"),
                None,
            ),
            (
                "a tool not yet given",
                {**good, FIND: [TAGS, SEARCHES, DONE]},
                Outcome(
                    "fail", "tool:not-offered", f"turn 1: called {TAG}, which the agent was not given in that turn"
                ),
                None,
            ),
            (
                "an error in a turn is the trial's error, not a turn's failure",
                {FIND: [SEARCHES, DONE], SAY: [SEARCHES]},
                Outcome("error", "reply:stub-unknown-prompt", "the stub has no canned reply for step 2"),
                None,
            ),
        ]
        for name, replies, outcome, verdicts in cases:
            with self.subTest(name):
                got, turn_verdicts = self.run_tidy(replies)
                self.assertEqual(got, outcome)
                if verdicts is not None:
                    self.assertEqual(turn_verdicts, verdicts)

    def test_the_tasks_own_expect_still_judges_the_whole_conversation(self) -> None:
        replies = {FIND: [SEARCHES, DONE], SAY: {"text": "Two."}, TAG_THEM: [SEARCHES, TAGS, DONE]}
        outcome, _ = self.run_tidy(replies, expect={"trajectory": [TAG, SEARCH], "order": "exact"})
        self.assertEqual(
            (outcome.code, outcome.reason),
            ("trajectory:length", f"expected exactly 2 calls ({TAG}, {SEARCH}), got 3 ({SEARCH}, {SEARCH}, {TAG})"),
        )

    def test_a_refusal_turn_that_calls_is_a_violation_named_by_its_turn(self) -> None:
        replies = {FIND: [SEARCHES, DONE], SAY: [SEARCHES, DONE], TAG_THEM: [SEARCHES, TAGS, DONE]}
        turns = [{"prompt": SAY, "expect": {"refusal": True}}, {"prompt": TAG_THEM, "addTools": [TAG]}]
        outcome, _ = self.run_tidy(replies, turns=turns)
        self.assertEqual(
            outcome,
            Outcome("fail", "refusal:called-tool", f"turn 2: expected no tool call, got {SEARCH}", "forbidden-tool"),
        )
