"""Turns with expectations of their own: per-turn expect and noCall, expect.firstTurn, a task's tools and a turn's
addTools; each turn judged on its own calls, each backend sent the tools of that turn, each turn's verdict kept."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from backends.stub import StubBackend
from harness.records import ExpectNoCall, Outcome, Task
from harness.results import task_entry
from harness.running import run_task
from harness.taskfile import load_task_file
from tests import gemini_fake
from tests.providers import conversation_fake
from tests.responses_fake import responses_fake
from tests.support import (
    DATA,
    SHIPPED_TASKS,
    Received,
    Respond,
    TempDirTestCase,
    backend_for,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)

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
                "a refusal in the noCall turn, which expects an answer",
                {**good, SAY: {"refused": True, "text": "I can't say."}},
                Outcome("fail", "reply:refused", "turn 2: expected an answer, got a refusal (refused: true)"),
                None,
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
                Outcome("fail", "tool:no-call", f"turn 1: expected {SEARCH}, got a text reply with no tool call"),
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

    def test_a_turns_forbidden_tools_and_text_hold_in_that_turn_only(self) -> None:
        turns = [
            {"prompt": SAY, "expect": {"noCall": True, "forbiddenText": ["the plan"]}},
            {"prompt": TAG_THEM, "addTools": [TAG], "expect": {"tool": TAG, "forbiddenTools": [SEARCH]}},
        ]
        good = {FIND: [SEARCHES, {"text": "Found the plan."}], SAY: {"text": "Two."}, TAG_THEM: [TAGS, DONE]}
        self.assertEqual(self.run_tidy(good, turns=turns)[0], Outcome("pass"))
        cases = [
            (
                {**good, SAY: {"text": "Here is the plan."}},
                Outcome(
                    "fail",
                    "leak:forbidden-text",
                    "turn 2: the reply contains forbidden text the plan",
                    "forbidden-text",
                ),
            ),
            (
                {**good, TAG_THEM: [SEARCHES, TAGS, DONE]},
                Outcome("fail", "tool:forbidden", f"turn 3: called forbidden {SEARCH}(query)", "forbidden-tool"),
            ),
        ]
        for replies, outcome in cases:
            with self.subTest(outcome.code):
                self.assertEqual(self.run_tidy(replies, turns=turns)[0], outcome)


def tools_of(body: dict[str, Any], provider: str) -> list[str]:
    """The names of the tools a provider request offers, as the task file names them."""
    entries = body.get("tools", [])
    if provider == "gemini":
        entries = entries[0]["functionDeclarations"] if entries else []
    names = [entry["function"]["name"] if provider == "openai" else entry["name"] for entry in entries]
    return [name.replace("_", ".") for name in names]


# Each provider's fake, checked by its SDK, and where the backend finds it.
FAKES: dict[str, tuple[Callable[[Any, list[str]], Respond], str, str]] = {
    "openai": (lambda policy, invalid: conversation_fake("openai", policy, invalid), "OPENAI_BASE_URL", "/v1"),
    "anthropic": (lambda policy, invalid: conversation_fake("anthropic", policy, invalid), "ANTHROPIC_BASE_URL", ""),
    "openai-responses": (responses_fake, "OPENAI_BASE_URL", "/v1"),
    "gemini": (gemini_fake.conversation_fake, "GOOGLE_GEMINI_BASE_URL", ""),
}


def tidy_model(events: list[Any]) -> tuple[list[Any], str | None]:
    """Search in turn 1 and answer; answer turn 2 in words; search, then tag, then answer in turn 3."""
    users = [index for index, event in enumerate(events) if event[0] == "user"]
    results = [event for event in events[users[-1] :] if event[0] == "result"]
    if len(users) == 2 or len(results) == (1 if len(users) == 1 else 2):
        return [], "Done."
    if not results:
        return [("imageman_asset_search", {"query": "launch"})], None
    return [("imageman_asset_tag", {"assetIds": ["ast_1"], "tags": ["approved"]})], None


class ToolsOfTheTurn(TempDirTestCase):
    """Each backend sends the tools the agent has at that turn; a task without the new keys sends what it sent."""

    def tasks(self, *tasks: dict[str, Any]) -> dict[str, Task]:
        data = canonical_task_data()
        data["tasks"] = list(tasks)
        return {task.id: task for task in load_task_file(self.write_json("tasks.json", data), {}).tasks}

    def test_a_provider_is_sent_the_tools_of_each_turn(self) -> None:
        loaded = self.tasks(tidy(), {"id": "plain", "category": "c", "prompt": FIND, "expect": {"tool": SEARCH}})
        all_tools = [tool["name"] for tool in canonical_task_data()["tools"]]
        for provider, (make_fake, variable, path) in FAKES.items():
            with self.subTest(provider):
                invalid: list[str] = []
                fake = self.serve(make_fake(tidy_model, invalid))
                backend = backend_for({"EVAL_BACKEND": provider, variable: fake.url(path), "EVAL_MODEL": "m"})
                self.addCleanup(backend.transport.close)
                result = run_task(backend, loaded["tidy"])
                self.assertEqual((result.outcome, invalid), (Outcome("pass"), []))
                offered = [tools_of(received.json, provider) for received in fake.received]
                self.assertEqual(offered, [[SEARCH]] * 3 + [[SEARCH, TAG]] * 3)
                run_task(backend, loaded["plain"])
                plain = fake.received[-1].json
                self.assertEqual(tools_of(plain, provider), all_tools)
                self.assertEqual(
                    {key: value for key, value in plain.items() if key not in ("messages", "input", "contents")},
                    {key: value for key, value in backend.request_base.items()},  # type: ignore[attr-defined]
                    "a task without the new keys sends what it sent before",
                )

    def test_a_turn_that_offers_no_tool_sends_none(self) -> None:
        loaded = self.tasks(tidy(tools=[], turns=[{"prompt": SAY, "addTools": [SEARCH]}], expect={"tool": SEARCH}))
        replies = iter([([], "Which ones?"), ([("imageman_asset_search", {"query": "x"})], None), ([], "Found.")])
        fake = self.serve(conversation_fake("openai", lambda events: next(replies), []))
        backend = backend_for({"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": fake.url("/v1"), "EVAL_MODEL": "m"})
        self.addCleanup(backend.transport.close)
        self.assertEqual(run_task(backend, loaded["tidy"]).outcome, Outcome("pass"))
        first = fake.received[0].json
        self.assertNotIn("tools", first)
        self.assertNotIn("tool_choice", first, "the API refuses tool_choice without tools")

    def test_the_http_body_carries_the_tools_of_the_turn_only_for_a_task_that_narrows_or_adds(self) -> None:
        bodies: list[dict[str, Any]] = []

        def agent(received: Received, handler: BaseHTTPRequestHandler) -> None:
            bodies.append(received.json)
            send_json(handler, SEARCHES if len(bodies) != 2 else {"text": "Two."})

        fake = self.serve(agent)
        backend = backend_for({"EVAL_BACKEND": "http", "EVAL_AGENT_URL": fake.url()})
        self.addCleanup(backend.transport.close)  # type: ignore[attr-defined]
        loaded = self.tasks(
            tidy(expect={"tool": SEARCH}, turns=[SAY, {"prompt": TAG_THEM, "addTools": [TAG]}]),
            {"id": "plain", "category": "c", "prompt": FIND, "turns": [SAY], "expect": {"tool": SEARCH}},
        )
        run_task(backend, loaded["tidy"])
        surface = {tool["name"]: tool for tool in canonical_task_data()["tools"]}
        self.assertEqual(
            [body["tools"] for body in bodies],
            [[surface[SEARCH]], [surface[SEARCH]], [surface[SEARCH], surface[TAG]]],
        )
        self.assertEqual(list(surface[SEARCH]), ["name", "description", "inputSchema"])
        bodies.clear()
        run_task(backend, loaded["plain"])
        self.assertEqual(
            [sorted(body) for body in bodies],
            [["attempt", "conversationId", "messages", "prompt", "runId", "taskId", "trial", "trialId", "turn"]] * 2,
        )
        self.assertEqual(json.dumps(bodies[0]["messages"]), json.dumps([{"role": "user", "content": FIND}]))

    def test_the_command_agent_reads_the_tools_of_its_turn_on_stdin(self) -> None:
        script, received = self.write_json("replies.json", None), f"{self.tmp}/received"
        with open(script, "w", encoding="ascii") as f:
            f.write("\n".join(json.dumps(reply) for reply in (SEARCHES, {"text": "Two."})))
        agent = os.path.join(DATA, "agents", "script_agent.py")
        command = f"{sys.executable} -S {agent} replay {received} {script}"
        backend = backend_for({"EVAL_BACKEND": "command", "EVAL_AGENT_CMD": command})
        loaded = self.tasks(tidy(expect={"tool": SEARCH}, turns=[{"prompt": SAY, "addTools": [TAG]}]))
        self.assertEqual(run_task(backend, loaded["tidy"]).outcome, Outcome("pass"))
        with open(received, encoding="utf-8") as f:
            bodies = [json.loads(line) for line in f]
        self.assertEqual([[tool["name"] for tool in body["tools"]] for body in bodies], [[SEARCH], [SEARCH, TAG]])


class FromTheCommandLine(TempDirTestCase):
    def test_a_run_records_each_turns_verdict_and_the_results_read_back(self) -> None:
        with open(SHIPPED_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        (task,) = [task for task in data["tasks"] if task["id"] == "ai-image-generate-asks-first"]
        generate = "imageman.ai.image.generate"
        task["tools"] = []
        task["turns"] = [{"prompt": task["turns"][0], "addTools": [generate], "expect": {"tool": generate}}]
        task["expect"]["firstTurn"] = {"noCall": True}
        data["tasks"] = [task]
        env = clean_env(EVAL_TASKS=self.write_json("tasks.json", data))
        _, stderr, code = run_cli("--out", "run.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        trial = self.read_json("run.json")["results"][0]["trialResults"][0]
        passed = {"status": "pass", "code": None, "reason": None}
        self.assertEqual([turn["verdict"] for turn in trial["conversation"]], [passed, passed])
        _, stderr, code = run_cli("report", "run.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0), "a results file with turn verdicts loads back")
