"""Conversations on the provider backends: the harness plays the tools, step by step, with the providers' own id
linkage, against fakes that refuse any conversation whose ids do not link up; every request body is one the official
SDKs' request types accept."""

from __future__ import annotations

import json
from typing import Any

from harness.records import Outcome, Result
from harness.running import run_task
from harness.taskfile import load_task_file
from tests.providers import (
    Event,
    Planted,
    Unlinked,
    anthropic_events,
    check_anthropic_request,
    check_openai_request,
    conversation_fake,
    openai_events,
)
from tests.support import SHIPPED_TASKS, TempDirTestCase, backend_for, canonical_task_data, clean_env, run_cli

PROVIDERS = {"openai": ("OPENAI_BASE_URL", "/v1"), "anthropic": ("ANTHROPIC_BASE_URL", "")}
SEARCH, TAG, GET, GENERATE = (
    "imageman_asset_search",
    "imageman_asset_tag",
    "imageman_asset_get",
    "imageman_ai_image_generate",
)


def results(events: list[Event]) -> list[Event]:
    return [event for event in events if event[0] == "result"]


def search_then_tag(events: list[Event]) -> tuple[list[Any], str | None]:
    """Search; then tag what the search returned; then say what was tagged, as the tag's result says."""
    done = results(events)
    if not done:
        return [(SEARCH, {"query": "launch photos"})], None
    name, content = done[-1][1], json.loads(done[-1][2])
    if name == SEARCH:
        return [(TAG, {"assetIds": [asset["id"] for asset in content["assets"]], "tags": ["approved"]})], None
    return [], f"Tagged {', '.join(content['tagged'])}."


def two_at_once(events: list[Event]) -> tuple[list[Any], str | None]:
    """Get two assets in one reply (parallel calls), then compare them from the results."""
    done = results(events)
    if not done:
        return [(GET, {"assetId": "ast_1"}), (GET, {"assetId": "ast_2"})], None
    widths = {json.loads(content)["id"]: json.loads(content)["width"] for _, _, content in done}
    return [], f"ast_1 is {widths['ast_1']} px wide, ast_2 {widths['ast_2']} px."


def keeps_searching(events: list[Event]) -> tuple[list[Any], str | None]:
    return [(SEARCH, {"query": f"try {len(results(events)) + 1}"})], None


def polls(events: list[Event]) -> tuple[list[Any], str | None]:
    """Ask for the render job's status until it is done, then say so: it polls for ever when it never is."""
    done = results(events)
    if done and json.loads(done[-1][2])["status"] == "done":
        return [], "The render is done."
    return [(GET, {"assetId": "job_1"})], None


def three_alike_at_once(events: list[Event]) -> tuple[list[Any], str | None]:
    """The same call three times in one reply (parallel calls), then an answer from the results."""
    if not results(events):
        return [(GET, {"assetId": "ast_1"})] * 3, None
    return [], "ast_1 is 4000 px wide."


def asks_first(events: list[Event]) -> tuple[list[Any], str | None]:
    """Ask what the banner should show; generate once told; then say it is done."""
    users = [event for event in events if event[0] == "user"]
    if len(users) == 1:
        return [], "What should the banner show, and in which shape?"
    if not results(events):
        return [(GENERATE, {"prompt": users[-1][1], "aspectRatio": "16:9"})], None
    return [], "Here it is."


TASKS = [
    {
        "id": "tag-from-search",
        "category": "asset.tag",
        "prompt": "Tag the launch photos as approved.",
        "toolResults": {
            "imageman.asset.search": {"assets": [{"id": "ast_1"}, {"id": "ast_2"}]},
            "imageman.asset.tag": {"tagged": {"echo": "assetIds"}},
        },
        "expect": {
            "trajectory": [
                "imageman.asset.search",
                {"tool": "imageman.asset.tag", "argValues": {"assetIds": [["ast_1", "ast_2"]]}},
            ]
        },
    },
    {
        "id": "compare-two",
        "category": "asset.get",
        "prompt": "Which is wider, ast_1 or ast_2?",
        "toolResults": {
            "imageman.asset.get": {
                "sequence": [{"id": {"echo": "assetId"}, "width": 4000}, {"id": {"echo": "assetId"}, "width": 800}]
            }
        },
        "expect": {
            "trajectory": [
                {"tool": "imageman.asset.get", "argValues": {"assetId": ["ast_1"]}},
                {"tool": "imageman.asset.get", "argValues": {"assetId": ["ast_2"]}},
            ],
            "order": "any-order",
        },
    },
    {
        "id": "loops",
        "category": "asset.search",
        "prompt": "Find the launch photos.",
        "maxSteps": 3,
        "toolResults": {"imageman.asset.search": {"assets": []}},
        "expect": {"tool": "imageman.asset.search"},
    },
    {
        "id": "render-polled",
        "category": "asset.get",
        "prompt": "Is the render job_1 done yet?",
        "toolResults": {
            "imageman.asset.get": {"sequence": [{"status": "pending"}, {"status": "pending"}, {"status": "done"}]}
        },
        "expect": {"tool": "imageman.asset.get", "argValues": {"assetId": ["job_1"]}},
    },
    {
        "id": "render-stuck",
        "category": "asset.get",
        "prompt": "Is the render job_1 done yet?",
        "toolResults": {"imageman.asset.get": {"status": "pending"}},
        "expect": {"tool": "imageman.asset.get", "argValues": {"assetId": ["job_1"]}},
    },
    {
        "id": "three-alike",
        "category": "asset.get",
        "prompt": "How wide is ast_1?",
        "toolResults": {"imageman.asset.get": {"id": "ast_1", "width": 4000}},
        "expect": {"tool": "imageman.asset.get"},
    },
    {
        "id": "banner",
        "category": "ai.image.generate",
        "prompt": "Make us a banner.",
        "turns": ["A lighthouse at dawn."],
        "expect": {"trajectory": [{"tool": "imageman.ai.image.generate", "turn": 2}], "order": "exact"},
    },
]


# Gemini through its OpenAI-compatible endpoint signs each call and wants the signature back, as it 400s without it.
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly"
)


def gemini_signs(reply: dict[str, Any]) -> None:
    message = reply["choices"][0]["message"]
    message["reasoning_content"] = "The user wants the launch photos tagged."
    for call in message.get("tool_calls", []):
        call["extra_content"] = {"google": {"thought_signature": f"sig-{call['id']}"}}


def gemini_unsigned(body: dict[str, Any]) -> str | None:
    for message in body["messages"]:
        for call in message.get("tool_calls") or [] if message["role"] == "assistant" else []:
            if call.get("extra_content") != {"google": {"thought_signature": f"sig-{call['id']}"}}:
                return MISSING_SIGNATURE
            if (
                message.get("reasoning_content") != "The user wants the launch photos tagged."
                or message.get("content", "") is not None
            ):
                return "the message did not come back as it came"
    return None


def web_search_first(reply: dict[str, Any]) -> None:
    """A server tool's blocks before the model's own calls, as Claude sends them after searching the web (with no
    call of the task's tools, a server tool's call is an error: tests/test_providers.py)."""
    if any(block["type"] == "tool_use" for block in reply["content"]):
        reply["content"][:0] = [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "launch photos"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        ]


def web_search_dropped(body: dict[str, Any]) -> str | None:
    for message in body["messages"]:
        if message["role"] == "assistant" and [block["type"] for block in message["content"][:2]] != [
            "server_tool_use",
            "web_search_tool_result",
        ]:
            return "messages: the server_tool_use and web_search_tool_result blocks did not come back"
    return None


def no_ids(reply: dict[str, Any]) -> None:
    for call in reply["choices"][0]["message"].get("tool_calls", []):
        del call["id"]


SENT_BACK = {
    "openai: Gemini's thought signatures and reasoning": (
        "openai",
        Planted(gemini_signs, gemini_unsigned, ("extra_content", "reasoning_content")),
    ),
    "anthropic: a server tool's blocks": ("anthropic", Planted(web_search_first, web_search_dropped)),
    "openai: calls without ids get ours": ("openai", Planted(no_ids, lambda body: None)),
}


class ProviderConversations(TempDirTestCase):
    def setUp(self) -> None:
        super().setUp()
        data = canonical_task_data()
        data["tasks"] = TASKS
        self.tasks = {task.id: task for task in load_task_file(self.write_json("tasks.json", data), {}).tasks}

    def converse(
        self, provider: str, policy: Any, task_id: str, planted: Planted | None = None
    ) -> tuple[Result, list[Any], list[str]]:
        """The task sent to the provider's fake model: its result, what the fake received, any body the SDK refuses."""
        invalid: list[str] = []
        fake = self.serve(conversation_fake(provider, policy, invalid, planted))
        variable, path = PROVIDERS[provider]
        backend = backend_for({"EVAL_BACKEND": provider, variable: fake.url(path), "EVAL_MODEL": "m"})
        self.addCleanup(backend.transport.close)
        return run_task(backend, self.tasks[task_id]), fake.received, invalid

    def test_search_then_tag_with_the_ids_the_search_returned(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                result, received, invalid = self.converse(provider, search_then_tag, "tag-from-search")
                self.assertEqual((result.outcome, invalid), (Outcome("pass"), []))
                self.assertEqual(len(received), 3)
                self.assertEqual(result.reply.text, "Tagged ast_1, ast_2.")
                tokens = (120, 30) if provider == "openai" else (200, 40)
                self.assertEqual(result.reply.usage, (3 * tokens[0], 3 * tokens[1]), "usage is summed over the calls")

    def test_what_the_server_sent_goes_back_as_it_came(self) -> None:
        for name, (provider, planted) in SENT_BACK.items():
            with self.subTest(name):
                result, received, invalid = self.converse(provider, search_then_tag, "tag-from-search", planted)
                self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 3))
        ids = [
            call["id"] for m in received[-1].json["messages"] if m["role"] == "assistant" for call in m["tool_calls"]
        ]
        self.assertEqual(len(set(ids)), 2)

    def test_the_sdk_check_lets_only_the_planted_fields_through(self) -> None:
        call = {"id": "c", "type": "function", "function": {"name": SEARCH, "arguments": "{}"}, "extra_content": {}}
        body = {
            "model": "m",
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "r"},
                {"role": "tool", "tool_call_id": "c", "content": "{}"},
            ],
        }
        check_openai_request(body, ("extra_content", "reasoning_content"))
        for planted in [(), ("extra_content",), ("reasoning_content",)]:
            with self.subTest(planted=planted), self.assertRaises(ValueError):
                check_openai_request(body, planted)

    def test_parallel_calls_each_get_their_result(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                result, received, invalid = self.converse(provider, two_at_once, "compare-two")
                self.assertEqual((result.outcome, invalid), (Outcome("pass"), []))
                self.assertEqual(result.reply.text, "ast_1 is 4000 px wide, ast_2 800 px.")
                self.assertEqual(len(received), 2)

    def test_a_model_that_loops_is_stopped_by_max_steps(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                result, received, invalid = self.converse(provider, keeps_searching, "loops")
                self.assertEqual((result.outcome.code, invalid, len(received)), ("conversation:max-steps", [], 3))

    def test_polling_whose_result_changes_is_progress_not_a_loop(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                result, received, invalid = self.converse(provider, polls, "render-polled")
                self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 4))
                self.assertEqual(result.reply.text, "The render is done.")

    def test_three_calls_alike_in_one_reply_are_not_a_loop(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                result, received, invalid = self.converse(provider, three_alike_at_once, "three-alike")
                self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 2))
                self.assertEqual(len(result.reply.tool_calls), 3)

    def test_the_same_call_with_the_same_result_is_stopped_at_the_third_step_as_a_loop(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                result, received, invalid = self.converse(provider, polls, "render-stuck")
                self.assertEqual(
                    (result.outcome, invalid, len(received)),
                    (
                        Outcome(
                            "fail",
                            "conversation:loop",
                            "the same calls with the same results in 3 steps in a row in turn 1:"
                            ' imageman.asset.get({"assetId": "job_1"}) (maxRepeats 3)',
                        ),
                        [],
                        3,
                    ),
                )
                self.assertEqual([len(step.results) for step in result.turns[0].steps], [1, 1, 1])

    def test_follow_up_turns_carry_the_conversation_so_far(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                result, received, invalid = self.converse(provider, asks_first, "banner")
                self.assertEqual((result.outcome, invalid), (Outcome("pass"), []))
                self.assertEqual(len(received), 3)
                second = received[1].json["messages"]
                self.assertEqual(
                    [(m["role"], m["content"]) for m in second[-3:]],
                    [
                        ("user", "Make us a banner."),
                        (
                            "assistant",
                            "What should the banner show, and in which shape?"
                            if provider == "openai"
                            else [{"type": "text", "text": "What should the banner show, and in which shape?"}],
                        ),
                        ("user", "A lighthouse at dawn."),
                    ],
                )

    def test_the_fakes_refuse_results_that_do_not_link_up(self) -> None:
        call = {"id": "call_1", "type": "function", "function": {"name": SEARCH, "arguments": "{}"}}
        openai_cases = [
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": None, "tool_calls": [call]}],
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_2", "content": "{}"},
            ],
        ]
        for messages in openai_cases:
            with self.subTest("openai", messages=len(messages)), self.assertRaises(Unlinked):
                openai_events(messages)
        use = {"type": "tool_use", "id": "toolu_1", "name": SEARCH, "input": {}}
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{}"}
        anthropic_cases = [
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [use]},
                {"role": "user", "content": "b"},
            ],
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [use]},
                {"role": "user", "content": [{"type": "text", "text": "b"}, result]},
            ],
            [{"role": "assistant", "content": "a"}],
        ]
        for messages in anthropic_cases:
            with self.subTest("anthropic", messages=len(messages)), self.assertRaises(Unlinked):
                anthropic_events(messages)

    def test_the_sdk_checks_refuse_what_the_sdks_refuse(self) -> None:
        good = {"model": "m", "messages": [{"role": "user", "content": "a"}], "max_tokens": 5}
        check_openai_request(good)
        check_anthropic_request(good)
        with self.assertRaises(ValueError):
            check_openai_request({**good, "messages": [{"role": "tool", "content": "{}"}]})
        with self.assertRaises(ValueError):
            check_anthropic_request(
                {**good, "messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]}
            )
        with self.assertRaises(ValueError):
            check_anthropic_request({**good, "messages": [{"role": "user", "content": "a", "name": "x"}]})


class ProviderConversationsFromTheCommandLine(TempDirTestCase):
    def test_the_canonical_search_then_tag_on_each_provider(self) -> None:
        for provider in PROVIDERS:
            with self.subTest(provider):
                invalid: list[str] = []
                fake = self.serve(conversation_fake(provider, search_then_tag, invalid))
                variable, path = PROVIDERS[provider]
                env = clean_env(
                    EVAL_BACKEND=provider,
                    EVAL_MODEL="m",
                    EVAL_TASKS=SHIPPED_TASKS,
                    EVAL_TASK_GLOB="*-from-search",
                    EVAL_CANARY="canary-5b0c1d",
                )
                stdout, stderr, code = run_cli(env={**env, variable: fake.url(path)}, cwd=self.tmp)
                self.assertEqual((stderr, code, invalid), ("", 0, []))
                self.assertIn(
                    "imageman.asset.search(query) -> imageman.asset.tag(assetIds, tags)  (3 steps, 1 turn)", stdout
                )
                trial = self.read_json("eval-results.json")["results"][0]["trialResults"][0]
                self.assertEqual((trial["turns"], trial["steps"], trial["unscripted"]), (1, 3, []))
                self.assertEqual(trial["text"], "Tagged ast_q3a1, ast_q3a2, ast_q3a3.")
