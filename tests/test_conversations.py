"""Conversations: follow-up turns, scripted tool results and maxSteps in the task file; the harness playing the tools
step by step; the whole conversation scored and recorded."""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler
from typing import Any

from backends.stub import StubBackend
from harness.conversation import UNSCRIPTED, ToolPlayer, echoed, whole_reply
from harness.records import ConfigError, ExpectTrajectory, Outcome, Reply, Task, ToolCall, ToolScript
from harness.results import CONVERSATION_TEXT_LIMIT, task_entry
from harness.running import run_task
from harness.scoring import score
from harness.taskfile import load_task_file
from harness.text import calls_text
from tests.providers import anthropic_message, openai_completion
from tests.support import (
    CANONICAL_TASKS,
    DATA,
    Received,
    Respond,
    TempDirTestCase,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)

SEARCH, TAG, GENERATE = "imageman.asset.search", "imageman.asset.tag", "imageman.ai.image.generate"
FOUND = {"assets": [{"id": "ast_1"}, {"id": "ast_2"}]}


def search_then_tag(**task: Any) -> dict[str, Any]:
    """A task that needs a search, then a tag with the ids the search returned."""
    return {
        "id": "tag-from-search",
        "category": "asset.tag",
        "prompt": "Tag the launch photos as approved.",
        "toolResults": {SEARCH: FOUND, TAG: {"tagged": {"echo": "assetIds"}}},
        "expect": {
            "trajectory": [
                SEARCH,
                {"tool": TAG, "requiredArgs": ["assetIds", "tags"], "argValues": {"assetIds": [["ast_1", "ast_2"]]}},
            ]
        },
        **task,
    }


def asks_first(**task: Any) -> dict[str, Any]:
    """A task where the agent must ask before it acts: its one call answers the second turn."""
    return {
        "id": "banner",
        "category": "ai.image.generate",
        "prompt": "Make us a banner.",
        "turns": ["A lighthouse at dawn, widescreen."],
        "expect": {"trajectory": [{"tool": GENERATE, "turn": 2}], "order": "exact"},
        **task,
    }


class ConversationTaskFiles(TempDirTestCase):
    def task_file(self, *tasks: dict[str, Any], **top: Any) -> str:
        data = canonical_task_data()
        data["tasks"] = list(tasks)
        data.update(top)
        return self.write_json("tasks.json", data)

    def load(self, *tasks: dict[str, Any], **top: Any) -> tuple[Task, ...]:
        return load_task_file(self.task_file(*tasks, **top), {"EVAL_TEST_ID": "ast_9"}).tasks

    def test_turns_tool_results_and_max_steps_load(self) -> None:
        (tag,) = self.load(search_then_tag(maxSteps=3, turns=["Also ${EVAL_TEST_ID}, please."]))
        self.assertEqual(tag.turns, ("Also ast_9, please.",))
        self.assertEqual(
            tag.tool_results, {SEARCH: ToolScript((FOUND,)), TAG: ToolScript(({"tagged": {"echo": "assetIds"}},))}
        )
        self.assertEqual((tag.max_steps, tag.is_conversation), (3, True))
        (banner,) = self.load(asks_first())
        self.assertEqual((banner.max_steps, banner.tool_results), (8, {}))
        self.assertIsInstance(banner.expect, ExpectTrajectory)
        self.assertEqual(banner.expect.steps[0].turn, 2)
        self.assertEqual(banner.expect.describe(), "exactly imageman.ai.image.generate() in turn 2")

    def test_a_task_without_turns_or_tool_results_is_no_conversation(self) -> None:
        task = load_task_file(CANONICAL_TASKS).tasks[0]
        self.assertEqual((task.turns, task.tool_results, task.is_conversation), ((), {}, False))

    def test_the_files_tool_results_are_every_tasks_defaults_and_a_tasks_own_override_them(self) -> None:
        defaults = {SEARCH: {"assets": []}, GENERATE: {"sequence": [{"id": "g1"}, {"id": "g2"}]}}
        plain = {"id": "plain", "category": "c", "prompt": "p", "expect": {"tool": SEARCH}}
        tag, other = self.load(search_then_tag(), plain, toolResults=defaults)
        self.assertEqual(tag.tool_results[SEARCH], ToolScript((FOUND,)))
        self.assertEqual(tag.tool_results[GENERATE], ToolScript(({"id": "g1"}, {"id": "g2"})))
        self.assertEqual(
            other.tool_results, {SEARCH: ToolScript(({"assets": []},)), **{GENERATE: tag.tool_results[GENERATE]}}
        )
        self.assertTrue(other.is_conversation)

    def test_a_comment_is_for_the_author_unexpanded_and_changes_no_hash_a_default_result_does(self) -> None:
        (plain,) = self.load(search_then_tag())
        (commented,) = self.load(search_then_tag(comment={"todo": "add turns", "env": "${NOT_SET_ANYWHERE}"}))
        self.assertEqual(commented.sha256, plain.sha256)
        (defaulted,) = self.load(search_then_tag(), toolResults={GENERATE: {"id": "g1"}})
        self.assertNotEqual(defaulted.sha256, plain.sha256)

    def test_each_mistake_is_named_at_its_json_path(self) -> None:
        cases = [
            (
                "turns not a list",
                search_then_tag(turns="Also this"),
                'tasks[0].turns: expected a list of the user\'s follow-up messages, got the string "Also this"',
            ),
            (
                "a blank turn",
                search_then_tag(turns=["ok", " "]),
                "tasks[0].turns[1]: expected a non-empty string, got an empty string",
            ),
            (
                "tool results not an object",
                search_then_tag(toolResults=[FOUND]),
                "tasks[0].toolResults: expected an object of tool names to results, got a list",
            ),
            (
                "a result for a tool not in tools",
                search_then_tag(toolResults={"imageman.asset.serch": FOUND}),
                'tasks[0].toolResults.imageman.asset.serch: "imageman.asset.serch" is not in tools'
                ' (did you mean "imageman.asset.search"?)',
            ),
            (
                "an empty sequence",
                search_then_tag(toolResults={SEARCH: {"sequence": []}}),
                "tasks[0].toolResults.imageman.asset.search.sequence:"
                " expected a non-empty list of results, one per call",
            ),
            (
                "an echo of no argument",
                search_then_tag(toolResults={TAG: {"tagged": {"echo": "assetId"}}}),
                "tasks[0].toolResults.imageman.asset.tag.tagged.echo: expected an argument of imageman.asset.tag"
                ' (a property of its inputSchema), got "assetId" (did you mean "assetIds"?)',
            ),
            (
                "an echo in a sequence",
                search_then_tag(toolResults={TAG: {"sequence": [{}, [{"echo": 3}]]}}),
                "tasks[0].toolResults.imageman.asset.tag.sequence[1][0].echo: expected an argument of"
                " imageman.asset.tag (a property of its inputSchema), got a number",
            ),
            (
                "max steps of 0",
                search_then_tag(maxSteps=0),
                "tasks[0].maxSteps: expected a whole number from 1 to 100, got a number",
            ),
            (
                "max steps not a number",
                search_then_tag(maxSteps="8"),
                'tasks[0].maxSteps: expected a whole number from 1 to 100, got the string "8"',
            ),
            (
                "a turn past the last",
                asks_first(turns=[]),
                "tasks[0].expect.trajectory[0].turn: expected the user turn the call answers,"
                " 1 (the task has no turns), got a number",
            ),
            (
                "a turn of 0",
                asks_first(expect={"trajectory": [{"tool": GENERATE, "turn": 0}]}),
                "tasks[0].expect.trajectory[0].turn: expected the user turn the call answers,"
                " from 1 to 2 (the prompt and its turns), got a number",
            ),
            (
                "a turn on a tool task",
                asks_first(expect={"tool": GENERATE, "turn": 2}),
                "tasks[0].expect.turn: unknown key",
            ),
            (
                "a misspelt key",
                search_then_tag(toolResult={}),
                'tasks[0].toolResult: unknown key (did you mean "toolResults"?)',
            ),
        ]
        for name, task, message in cases:
            with self.subTest(name):
                path = self.task_file(task)
                with self.assertRaises(ConfigError) as caught:
                    load_task_file(path, {})
                self.assertEqual(str(caught.exception).split(" (and ")[0], f"{path}: {message}")

    def test_validate_warns_of_an_expected_tool_with_no_scripted_result(self) -> None:
        from harness.subcommands.validate import unscripted

        scripted = self.task_file(search_then_tag(), asks_first())
        self.assertEqual(unscripted(load_task_file(scripted, {})), [])
        partly = self.task_file(search_then_tag(toolResults={SEARCH: FOUND}), asks_first())
        self.assertEqual(
            unscripted(load_task_file(partly, {})),
            [
                "tag-from-search: imageman.asset.tag is expected but has no scripted result (a model calling it gets"
                ' "no result scripted for imageman.asset.tag")'
            ],
        )

    def test_a_bad_default_is_named_at_the_top_level(self) -> None:
        path = self.task_file(search_then_tag(), toolResults={"nope": 1})
        with self.assertRaises(ConfigError) as caught:
            load_task_file(path, {})
        self.assertEqual(str(caught.exception), f'{path}: toolResults.nope: "nope" is not in tools')


class PlayingTools(TempDirTestCase):
    def test_a_result_for_every_call_a_sequence_call_by_call_and_the_last_repeats(self) -> None:
        player = ToolPlayer({SEARCH: ToolScript(({"page": 1}, {"page": 2})), TAG: ToolScript(("done",))})
        calls = (ToolCall(SEARCH), ToolCall(TAG), ToolCall(SEARCH))
        self.assertEqual([r.content for r in player.play(calls)], [{"page": 1}, "done", {"page": 2}])
        self.assertEqual([r.content for r in player.play(calls)], [{"page": 2}, "done", {"page": 2}])

    def test_a_tool_with_no_script_gets_the_fixed_text_and_is_marked(self) -> None:
        (result,) = ToolPlayer({}).play((ToolCall(GENERATE, {"prompt": "x"}),))
        self.assertEqual((result.content, result.answered), (f"no result scripted for {GENERATE}", False))
        self.assertEqual(UNSCRIPTED.format(name="x"), "no result scripted for x")

    def test_echo_returns_what_was_asked_for_anywhere_in_a_result(self) -> None:
        result = {"tagged": {"echo": "assetIds"}, "meta": [{"echo": "tags"}, {"echo": "replace"}], "echo": "kept"}
        args = {"assetIds": ["a1"], "tags": ["x"]}
        self.assertEqual(echoed(result, args), {"tagged": ["a1"], "meta": [["x"], None], "echo": "kept"})
        self.assertEqual(echoed({"echo": "assetIds"}, args), ["a1"])


class Conversing(TempDirTestCase):
    """The loop, with the real stub given canned conversations: it plays a model, so the harness plays its tools."""

    def stub(self, replies: dict[str, Any]) -> StubBackend:
        return StubBackend(replies_path=self.write_json("replies.json", replies))

    def task(self, data: dict[str, Any]) -> Task:
        base = canonical_task_data()
        base["tasks"] = [data]
        return load_task_file(self.write_json("tasks.json", base), {}).tasks[0]

    def test_search_then_tag_with_the_ids_the_search_returned(self) -> None:
        stub = self.stub(
            {
                "Tag the launch photos as approved.": [
                    {"toolCall": {"name": SEARCH, "args": {"query": "launch"}}},
                    {"toolCall": {"name": TAG, "args": {"assetIds": ["ast_1", "ast_2"], "tags": ["approved"]}}},
                    {"text": "Done."},
                ]
            }
        )
        task = self.task(search_then_tag())
        result = run_task(stub, task)
        self.assertEqual(result.outcome, Outcome("pass"))
        self.assertEqual([len(request.steps) for request in stub.requests], [0, 1, 2])
        (turn,) = result.turns
        self.assertEqual(
            [r.content for step in turn.steps for r in step.results], [FOUND, {"tagged": ["ast_1", "ast_2"]}]
        )
        self.assertEqual((result.reply.attempts, result.reply.text, result.conversation_id), (3, "Done.", ""))
        entry = task_entry(task, [result])["trialResults"][0]
        self.assertEqual((entry["turns"], entry["steps"], entry["unscripted"]), (1, 3, []))
        self.assertEqual(
            entry["conversation"][0]["steps"][0]["results"],
            [{"name": SEARCH, "result": FOUND, "scripted": True, "source": "script"}],
        )
        self.assertEqual(
            calls_text(entry), "imageman.asset.search(query) -> imageman.asset.tag(assetIds, tags)  (3 steps, 1 turn)"
        )

    def test_asking_first_passes_and_acting_at_once_fails_on_the_turn(self) -> None:
        task = self.task(asks_first())
        asks = self.stub(
            {
                "Make us a banner.": {"text": "What should it show?"},
                "A lighthouse at dawn, widescreen.": [
                    {"toolCall": {"name": GENERATE, "args": {"prompt": "x"}}},
                    {"text": "Here."},
                ],
            }
        )
        result = run_task(asks, task)
        self.assertEqual(result.outcome, Outcome("pass"))
        self.assertEqual([(r.turn, len(r.steps)) for r in asks.requests], [(1, 0), (2, 0), (2, 1)])
        self.assertRegex(result.conversation_id, r"^[0-9a-f]{16}$")
        self.assertEqual({r.conversation_id for r in asks.requests}, {result.conversation_id})
        self.assertEqual(asks.requests[1].history[0].steps[0].reply.text, "What should it show?")
        acts = self.stub(
            {
                "Make us a banner.": [{"toolCall": {"name": GENERATE, "args": {"prompt": "x"}}}, {"text": "Here."}],
                "A lighthouse at dawn, widescreen.": {"text": "Done already."},
            }
        )
        result = run_task(acts, task)
        self.assertEqual(
            result.outcome,
            Outcome(
                "fail", "trajectory:step", "step 1: imageman.ai.image.generate was called in turn 1, expected in turn 2"
            ),
        )
        entry = task_entry(task, [result])["trialResults"][0]
        self.assertEqual(
            calls_text(entry),
            f"turn 1: {GENERATE}(prompt) | turn 2: (no call)  (3 steps, 2 turns)",
        )

    def test_a_model_that_keeps_calling_is_stopped_by_max_steps_and_fails(self) -> None:
        stub = self.stub({"Tag the launch photos as approved.": [{"toolCall": {"name": SEARCH, "args": {}}}] * 10})
        result = run_task(stub, self.task(search_then_tag(maxSteps=3)))
        self.assertEqual(len(stub.requests), 3)
        self.assertEqual(
            result.outcome,
            Outcome(
                "fail",
                "conversation:max-steps",
                "still calling tools after 3 model calls in one turn (last: imageman.asset.search -> "
                "imageman.asset.search -> imageman.asset.search); maxSteps stopped it",
            ),
        )
        self.assertEqual(result.turns[0].steps[-1].results, (), "the last calls get no results: nothing asks again")

    def test_an_error_mid_conversation_ends_it_as_an_error_with_what_came_before(self) -> None:
        stub = self.stub({"Tag the launch photos as approved.": [{"toolCall": {"name": SEARCH, "args": {}}}]})
        task = self.task(search_then_tag())
        result = run_task(stub, task)
        self.assertEqual(
            (result.outcome.status, result.outcome.code, result.outcome.reason),
            ("error", "reply:stub-unknown-prompt", "the stub has no canned reply for step 2"),
        )
        entry = task_entry(task, [result])["trialResults"][0]
        self.assertEqual(
            entry["conversation"][0]["steps"][1]["error"],
            "reply:stub-unknown-prompt: the stub has no canned reply for step 2",
        )
        self.assertEqual(calls_text(entry), "imageman.asset.search() -> (error)  (2 steps, 1 turn)")

    def test_a_tool_with_no_script_is_listed_in_the_record(self) -> None:
        stub = self.stub(
            {
                "Make us a banner.": [{"toolCall": {"name": GENERATE, "args": {"prompt": "x"}}}, {"text": "Hmm."}],
                "A lighthouse at dawn, widescreen.": {"text": "Done."},
            }
        )
        task = self.task(asks_first(toolResults={SEARCH: FOUND}))
        entry = task_entry(task, [run_task(stub, task)])["trialResults"][0]
        self.assertEqual(entry["unscripted"], [GENERATE])
        self.assertEqual(
            entry["conversation"][0]["steps"][0]["results"],
            [
                {
                    "name": GENERATE,
                    "result": f"no result scripted for {GENERATE}",
                    "scripted": False,
                    "source": "unscripted",
                }
            ],
        )

    def test_a_refusal_task_refuses_in_every_turn(self) -> None:
        task = self.task(asks_first(expect={"refusal": True}))
        stub = self.stub(
            {
                "Make us a banner.": {"refused": True, "text": "No."},
                "A lighthouse at dawn, widescreen.": [{"toolCall": {"name": GENERATE, "args": {}}}, {"text": "Fine."}],
            }
        )
        outcome = run_task(stub, task).outcome
        self.assertEqual((outcome.code, outcome.violation), ("refusal:called-tool", "forbidden-tool"))

    def test_the_record_cuts_long_texts_and_results(self) -> None:
        long_text, long_result = "x" * 5000, {"blob": "y" * 5000}
        stub = self.stub(
            {"Tag the launch photos as approved.": [{"toolCall": {"name": SEARCH, "args": {}}}, {"text": long_text}]}
        )
        task = self.task(search_then_tag(toolResults={SEARCH: long_result}))
        entry = task_entry(task, [run_task(stub, task)])["trialResults"][0]
        first, last = entry["conversation"][0]["steps"]
        self.assertEqual(len(last["text"]), CONVERSATION_TEXT_LIMIT)
        self.assertTrue(last["text"].endswith("..."))
        self.assertEqual(first["results"][0]["result"], json.dumps(long_result)[: CONVERSATION_TEXT_LIMIT - 3] + "...")
        self.assertEqual(entry["text"], long_text, "the trial's text is whole: it is what was scored")


class WholeReply(TempDirTestCase):
    def test_calls_in_order_marked_with_their_turn_and_tokens_summed(self) -> None:
        from harness.records import Step, Turn

        turns = (
            Turn("a", (Step(Reply((ToolCall(SEARCH),), usage=(10, 2))), Step(Reply(text="asked", usage=(5, 1))))),
            Turn("b", (Step(Reply((ToolCall(TAG),), attempts=2)), Step(Reply(text="done", refused=True)))),
        )
        reply = whole_reply(turns)
        self.assertEqual([(c.name, c.turn) for c in reply.tool_calls], [(SEARCH, 1), (TAG, 2)])
        # A conversation that called tools refused nothing, whatever its last reply said.
        self.assertEqual((reply.text, reply.refused, reply.attempts, reply.usage), ("asked\ndone", False, 5, (15, 3)))

    def test_a_leak_or_a_forbidden_call_before_an_error_is_still_a_violation(self) -> None:
        task = Task("t", "c", "p", ExpectTrajectory((), forbidden_tools=(TAG,)))
        reply = Reply((ToolCall(TAG, {"assetIds": ["a"]}),), error_code="reply:timeout", error="slow")
        self.assertEqual(score(task, reply).code, "tool:forbidden")
        self.assertEqual(
            score(task, Reply((ToolCall(SEARCH),), error_code="reply:timeout", error="slow")).status, "error"
        )


class ConversationReports(TempDirTestCase):
    """Conversation trials through every report: JUnit, the job summary, shards merged, a run compared."""

    def test_junit_the_job_summary_merge_and_compare_carry_the_conversation(self) -> None:
        import junitparser

        from tests.support import SHIPPED_TASKS, clean_env, run_cli

        with open(SHIPPED_TASKS, encoding="utf-8") as f:
            data = json.load(f)
        data["tasks"] = [task for task in data["tasks"] if task["id"].endswith(("-from-search", "-asks-first"))]
        self.write_json("base.json", data)
        data["tasks"][1]["turns"] = ["Something else entirely."]  # the stub has nothing for it: an error in turn 2
        self.write_json("changed.json", data)
        env = clean_env()  # the two tasks have no placeholder: a canary set would be refused as unknown
        for k in (1, 2):
            run_cli("--tasks", "base.json", "--shard", f"{k}/2", "--out", f"s{k}.json", env=env, cwd=self.tmp)
        _, stderr, code = run_cli("merge", "s1.json", "s2.json", "--out", "merged.json", env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        merged = {entry["id"]: entry for entry in self.read_json("merged.json")["results"]}
        self.assertEqual(merged["ai-image-generate-asks-first"]["trialResults"][0]["turns"], 2)
        self.assertEqual(len(merged["asset-tag-from-search"]["trialResults"][0]["conversation"][0]["steps"]), 3)

        args = ("--tasks", "changed.json", "--out", "changed-run.json", "--junit", "junit.xml", "--summary-md", "s.md")
        _, _, code = run_cli(*args, env=env, cwd=self.tmp)
        self.assertEqual(code, 1)
        suite = next(iter(junitparser.JUnitXml.fromfile(os.path.join(self.tmp, "junit.xml"))))
        errored = next(case for case in suite if case.name == "ai-image-generate-asks-first")
        self.assertIn(
            "    turn 2, user: Something else entirely.\n"
            "      step 1: error reply:stub-unknown-prompt: the stub has no canned reply for this prompt",
            errored.result[0].text,
        )
        with open(os.path.join(self.tmp, "s.md"), encoding="utf-8") as f:
            summary = f.read()
        self.assertIn("  - turn 1, user: Can you make us a banner?\n    - step 1: said ", summary)

        stdout, _, code = run_cli("compare", "merged.json", "changed-run.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, "a turn that changed changes the definition: not the agent's doing")
        self.assertIn(
            "CHANGED DEFINITION ai-image-generate-asks-first  pass → error (reply:stub-unknown-prompt)", stdout
        )


TALK = {
    "id": "talk",
    "category": "asset.search",
    "prompt": "Find the launch photos.",
    "turns": ["And the others?"],
    "toolResults": {SEARCH: {"found": {"echo": "query"}}},
    "expect": {"trajectory": [SEARCH, TAG]},  # a tag never comes: the reports show the conversation
}
AFTER = {"id": "after", "category": "asset.search", "prompt": "Find the logos.", "expect": {"tool": SEARCH}}
CUT = "launch \U0001f680"[:-1] + "\ud83d"  # what "launch 🚀".slice(0, -1) leaves in JavaScript


class HalfAnEmoji(TempDirTestCase):
    """An agent that cuts its text inside an emoji (a JavaScript agent slicing UTF-16) sends a lone surrogate: the
    conversation goes on with it, every task runs, and every report is valid UTF-8 with the half shown escaped."""

    def test_every_backend_carries_it_and_every_task_runs(self) -> None:
        for backend in ("http", "command", "openai", "anthropic"):
            with self.subTest(backend):
                self.run_with(backend)

    def run_with(self, backend: str) -> None:
        data = canonical_task_data()
        # An agent that runs its own tools is served none here: it carries the half through its reports alone.
        own = {key: value for key, value in TALK.items() if key != "toolResults"}
        data["tasks"] = [TALK if backend in ("openai", "anthropic") else own, AFTER]
        env = clean_env(EVAL_BACKEND=backend, EVAL_TASKS=self.write_json("tasks.json", data), EVAL_CONCURRENCY="1")
        said = {"text": f"Searching {CUT}", "toolCall": {"name": SEARCH, "args": {"query": CUT}}}
        # A model is asked again with the search's result; an agent that runs its own tools answers turn 2 at once.
        models = backend in ("openai", "anthropic")
        replies = [said, {"text": f"Found {CUT}"}, *([{"text": "No others."}] if models else [])]
        replies.append({"toolCall": {"name": SEARCH, "args": {"query": "logos"}}})
        if backend == "command":
            script = os.path.join(self.tmp, "replies")
            with open(script, "w", encoding="ascii") as f:
                f.write("\n".join(map(json.dumps, replies)))
            received = os.path.join(self.tmp, "received")
            agent = os.path.join(DATA, "agents", "script_agent.py")
            env["EVAL_AGENT_CMD"] = f"{sys.executable} -S {agent} replay {received} {script}"
        else:
            fake = self.serve(self.agent_replying(backend, replies))
            where = {"http": "EVAL_AGENT_URL", "openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
            env[where[backend]] = fake.url({"http": "/run", "openai": "/v1", "anthropic": ""}[backend])
            env.update({"EVAL_MODEL": "m"} if models else {})
        reports = ("--junit", "junit.xml", "--summary-md", "summary.md", "--html", "report.html")
        stdout, stderr, code = run_cli(*reports, env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 1), stdout)
        written = {}
        for name in ("eval-results.json", "junit.xml", "summary.md", "report.html"):
            with open(os.path.join(self.tmp, name), "rb") as f:
                written[name] = f.read().decode("utf-8")  # strict: no lone surrogate reaches a file
            self.assertIn("\\ud83d", written[name], name)
        results = json.loads(written["eval-results.json"])
        self.assertEqual([entry["id"] for entry in results["results"]], ["talk", "after"])
        self.assertEqual(results["notRun"], [])
        steps = results["results"][0]["trialResults"][0]["conversation"][0]["steps"]
        self.assertEqual(steps[0]["toolCalls"], [{"name": SEARCH, "args": {"query": CUT}}])
        self.assertEqual(steps[0]["text"], f"Searching {CUT}")

    def agent_replying(self, backend: str, replies: list[dict[str, Any]]) -> Respond:
        """An http agent, or a provider's model, that says each of `replies` in turn."""

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            reply = replies.pop(0)
            if backend != "http":
                call = reply.get("toolCall")
                calls = [{"name": call["name"].replace(".", "_"), "args": call["args"]}] if call else []
                reply = (openai_completion if backend == "openai" else anthropic_message)(calls, reply.get("text"))
            send_json(handler, reply)

        return respond
