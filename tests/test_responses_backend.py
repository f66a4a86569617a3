"""The openai-responses backend against a loopback fake of the Responses API, stateless, conversations included; every
request it sends is one the openai SDK's request type accepts, and the SDK reads every reply the fake sends."""

from __future__ import annotations

import json
from typing import Any

import openai
from openai.types.responses import Response

from backends.openai_responses import OpenAIResponsesBackend
from eval_agent import configure
from harness.records import AgentSurface, ConfigError, Outcome, Result, Task
from harness.running import run_task
from harness.taskfile import load_task_file
from tests.providers import Unlinked, openai_error, provider_name
from tests.responses_fake import (
    USAGE,
    check_responses_request,
    failed,
    play_the_stub,
    reasoning_item,
    response,
    responses_events,
    responses_fake,
)
from tests.support import (
    CANONICAL_TASKS,
    SHIPPED_TASKS,
    LoopbackAgent,
    TempDirTestCase,
    canonical_task,
    canonical_task_data,
    clean_env,
    run_cli,
)
from tests.test_provider_conversations import TASKS, asks_first, keeps_searching, search_then_tag, two_at_once
from tests.test_providers import scripted

NAME = "openai-responses"
TOOLS = canonical_task_data()["tools"]
REFUSAL = "safety-leak-secrets"  # where an error taken for a refusal would pass
GET = {"name": "imageman_asset_get", "args": {"assetId": "a"}}
SEARCH = {"name": "imageman_asset_search", "args": {"query": "x"}}


class ResponsesTestCase(TempDirTestCase):
    def backend(
        self, fake: LoopbackAgent, system: str | None = None, tools: Any = None, **env: str
    ) -> OpenAIResponsesBackend:
        """The backend a run on the fake makes, in this process, with the canonical tools unless told otherwise."""
        settings = configure([], {"EVAL_BACKEND": NAME, "OPENAI_BASE_URL": fake.url("/v1"), "EVAL_MODEL": "m", **env})[
            2
        ]
        surface = AgentSurface(load_task_file(CANONICAL_TASKS).tools if tools is None else tools, system)
        backend = OpenAIResponsesBackend(settings, surface, "run-1")
        self.addCleanup(backend.transport.close)
        return backend

    def task(self, task_id: str) -> Task:
        """A canonical task, or one of the conversation tasks the provider backends are tested on."""
        data = canonical_task_data()
        data["tasks"] += TASKS
        return next(task for task in load_task_file(self.write_json("tasks.json", data)).tasks if task.id == task_id)

    def trial(self, respond: Any, task_id: str = "asset-get-details", **env: str) -> Result:
        """A task sent once, in this process, to the fake answering as `respond` says."""
        return run_task(self.backend(self.serve(respond), **env), self.task(task_id))


class FromTheCommandLine(ResponsesTestCase):
    def test_the_canonical_tasks_pass_end_to_end_conversations_included(self) -> None:
        invalid: list[str] = []
        fake = self.serve(responses_fake(play_the_stub, invalid))
        env = clean_env(
            EVAL_BACKEND=NAME,
            EVAL_MODEL="gpt-5-mini",
            OPENAI_BASE_URL=fake.url("/v1"),
            OPENAI_API_KEY="sk-test-3",
            EVAL_TASKS=SHIPPED_TASKS,
            EVAL_CANARY="canary-5b0c1d",
        )
        stdout, stderr, code = run_cli(env=env, cwd=self.tmp)
        self.assertEqual((stderr, code, invalid), ("", 0, []))
        sent = len(fake.received)
        self.assertGreater(sent, 15, "the conversations took more than one request")
        headline = stdout.splitlines()[-1]
        self.assertTrue(
            headline.startswith(f"15/15 PASS at 100% (gate 80%) · {sent * USAGE[0]} tokens in, {sent * USAGE[1]} out"),
            headline,
        )
        self.assertEqual(
            {(r.path, r.headers["Authorization"]) for r in fake.received}, {("/v1/responses", "Bearer sk-test-3")}
        )
        doc = self.read_json("eval-results.json")
        self.assertEqual(
            (doc["manifest"]["backend"], doc["manifest"]["backendSettings"]["model"]), (NAME, "gpt-5-mini")
        )
        self.assertEqual(
            (doc["usage"]["inputTokens"], doc["usage"]["outputTokens"]), (sent * USAGE[0], sent * USAGE[1])
        )
        trial = next(r for r in doc["results"] if r["id"] == "asset-tag-from-search")["trialResults"][0]
        self.assertEqual((trial["steps"], trial["usage"]), (3, {"inputTokens": 300, "outputTokens": 75}))
        self.assertNotIn("sk-test-3", stdout + json.dumps(doc))

    def test_a_rejected_key_stops_the_run_after_the_first_task_with_exit_3(self) -> None:
        fake = self.serve(scripted(openai_error(401, "Incorrect API key provided: sk-bad.")))
        env = clean_env(EVAL_BACKEND=NAME, EVAL_MODEL="m", OPENAI_BASE_URL=fake.url("/v1"), OPENAI_API_KEY="sk-bad")
        _, stderr, code = run_cli(env=env, cwd=self.tmp)
        self.assertEqual(
            (stderr, code),
            (
                f"eval_agent: error: OPENAI_API_KEY was rejected by {fake.url('/v1/responses')}: "
                "HTTP 401 Unauthorized: Incorrect API key provided: ***.\n",
                3,
            ),
        )
        self.assertEqual(len(fake.received), 1)
        doc = self.read_json("eval-results.json")
        self.assertEqual((len(doc["results"]), len(doc["notRun"])), (1, 9))


class Requests(ResponsesTestCase):
    def sent(self, **env: str) -> tuple[dict[str, Any], OpenAIResponsesBackend]:
        """The body of one request for asset-get-details, checked against the SDK's request type, and its backend."""
        fake = self.serve(scripted((200, response([GET]))))
        backend = self.backend(fake, **env)
        run_task(backend, canonical_task("asset-get-details"))
        body = fake.received[-1].json
        check_responses_request(body)
        return body, backend

    def test_the_request_is_stateless_with_flat_function_tools_and_nothing_of_the_answer_key(self) -> None:
        fake = self.serve(scripted((200, response([GET]))))
        run_task(self.backend(fake, system="You are Imageman's assistant."), canonical_task("asset-get-details"))
        body = fake.received[0].json
        check_responses_request(body)
        self.assertEqual(
            {key: value for key, value in body.items() if key != "tools"},
            {
                "model": "m",
                "instructions": "You are Imageman's assistant.",
                "input": [{"role": "user", "content": canonical_task("asset-get-details").prompt}],
                "tool_choice": "auto",
                "store": False,
                "include": ["reasoning.encrypted_content"],
                "max_output_tokens": 1024,
            },
        )
        self.assertEqual(
            body["tools"],
            [
                {
                    "type": "function",
                    "name": provider_name(tool["name"]),
                    "description": tool["description"],
                    "parameters": tool["inputSchema"],
                    "strict": False,
                }
                for tool in TOOLS
            ],
        )
        self.assertEqual(fake.received[0].path, "/v1/responses")
        self.assertNotIn("Authorization", fake.received[0].headers, "no key, no bearer")
        self.assertNotIn("requiredArgs", fake.received[0].body.decode())

    def test_temperature_and_reasoning_effort_are_sent_only_when_set(self) -> None:
        body, backend = self.sent()
        self.assertEqual(
            ({"temperature", "reasoning"} & set(body), "temperature" in backend.describe()), (set(), False)
        )
        body, backend = self.sent(EVAL_TEMPERATURE="0.3", EVAL_REASONING_EFFORT="high", EVAL_MAX_TOKENS="8192")
        self.assertEqual(
            (body["temperature"], body["reasoning"], body["max_output_tokens"]), (0.3, {"effort": "high"}, 8192)
        )
        self.assertEqual(
            {key: backend.describe()[key] for key in ("temperature", "reasoningEffort", "maxTokens")},
            {"temperature": 0.3, "reasoningEffort": "high", "maxTokens": 8192},
        )

    def test_settings_out_of_range_or_of_another_backend_are_one_line(self) -> None:
        base = {"EVAL_BACKEND": NAME, "EVAL_MODEL": "m"}
        for environ, message in [
            ({"EVAL_TEMPERATURE": "2.5"}, "EVAL_TEMPERATURE: expected a number from 0.0 to 2.0, got '2.5'"),
            (
                {"EVAL_REASONING_EFFORT": "max"},
                "EVAL_REASONING_EFFORT: expected none or minimal or low or medium or high or xhigh, got 'max'",
            ),
            (
                {"EVAL_MAX_TOKENS_FIELD": "max_tokens"},
                "EVAL_MAX_TOKENS_FIELD: set, but the openai-responses backend does not read it",
            ),
        ]:
            with self.subTest(message), self.assertRaises(ConfigError) as caught:
                configure([], {**base, **environ})
            self.assertEqual(str(caught.exception), message)

    def test_without_tools_neither_tools_nor_tool_choice_is_sent(self) -> None:
        fake = self.serve(scripted((200, response([], "Hello."))))
        run_task(self.backend(fake, tools=()), canonical_task(REFUSAL))
        body = fake.received[0].json
        check_responses_request(body)
        self.assertEqual({"tools", "tool_choice"} & set(body), set())


class Replies(ResponsesTestCase):
    def test_parallel_calls_bad_arguments_and_text_only_replies(self) -> None:
        for name, body, status, code in [
            ("parallel calls", response([SEARCH, GET], reasoning="Two lookups."), "pass", None),
            ("arguments that are not JSON", response([GET], arguments=['{"assetId": "a"']), "fail", "tool:bad-args"),
            ("arguments that are a list", response([GET], arguments=["[1]"]), "fail", "tool:bad-args"),
            ("text only is a refusal", response([], "Which asset?"), "fail", "tool:no-call"),
        ]:
            with self.subTest(name):
                result = self.trial(scripted((200, body)))
                self.assertEqual((result.outcome.status, result.outcome.code), (status, code))
        self.assertEqual((result.reply.text, result.reply.refused_by_provider), ("Which asset?", None))

    def test_a_refusal_the_provider_states_passes_a_refusal_task_and_says_so(self) -> None:
        for name, body, text, by in [
            ("a refusal part", response([], refusal="I can't help with that."), "I can't help with that.", "refusal"),
            (
                "stopped by a content filter",
                response([], "I can", status="incomplete", incomplete="content_filter"),
                "I can",
                "content_filter",
            ),
            (
                "stopped by a content filter before any text",
                response([], status="incomplete", incomplete="content_filter"),
                None,
                "content_filter",
            ),
        ]:
            with self.subTest(name):
                result = self.trial(scripted((200, body)), REFUSAL)
                self.assertEqual(result.outcome, Outcome("pass"))
                self.assertEqual(
                    (result.reply.refused, result.reply.text, result.reply.refused_by_provider), (True, text, by)
                )

    def test_a_truncated_failed_or_blank_response_is_an_error_that_keeps_its_tokens(self) -> None:
        for name, body, code, reason in [
            (
                "cut short by max_output_tokens",
                response([], "I can", reasoning="Long thought.", status="incomplete", incomplete="max_output_tokens"),
                "reply:truncated",
                "the response is incomplete (max_output_tokens) before any function call",
            ),
            (
                "a failed response",
                failed("server_error", "The model failed to generate a response."),
                "reply:provider-error",
                "the response failed (server_error): The model failed to generate a response.",
            ),
            ("no output", response([]), "reply:empty", "a blank response: no function call, no text"),
            ("blank text", response([], " \u200b"), "reply:empty", "a blank response: no function call, no text"),
            (
                "reasoning only",
                response([], reasoning="Hmm."),
                "reply:empty",
                "a blank response: no function call, no text",
            ),
        ]:
            with self.subTest(name):
                result = self.trial(scripted((200, body)), REFUSAL)
                self.assertEqual(
                    (result.outcome.status, result.outcome.code, result.outcome.reason), ("error", code, reason)
                )
                self.assertEqual(result.reply.usage, USAGE)

    def test_what_is_not_a_response_is_a_bad_provider_reply(self) -> None:
        for name, body in [
            ("no output", {"id": "resp_1", "object": "response"}),
            ("output not a list of items", {"output": {"type": "message"}}),
            ("a call without a name", {"output": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]}),
        ]:
            with self.subTest(name):
                result = self.trial(scripted((200, body)), REFUSAL)
                self.assertEqual((result.outcome.status, result.outcome.code), ("error", "reply:bad-provider-reply"))

    def test_a_call_in_an_output_item_of_another_type_is_an_error_never_a_refusal(self) -> None:
        text = response([], "I won't do that.")
        for kind, item in [
            ("custom_tool_call", {"type": "custom_tool_call", "call_id": "c", "name": GET["name"], "input": "a"}),
            ("mcp_call", {"type": "mcp_call", "id": "m", "name": GET["name"], "arguments": "{}", "server_label": "s"}),
            ("web_search_call", {"type": "web_search_call", "id": "w", "status": "completed"}),
        ]:
            with self.subTest(kind):
                result = self.trial(scripted((200, {**text, "output": [item, *text["output"]]})), REFUSAL)
                self.assertEqual(
                    (result.outcome.status, result.outcome.code, result.outcome.reason),
                    (
                        "error",
                        "reply:bad-provider-reply",
                        f"an output item of type {kind}: a call of a tool the harness did not offer (it offers "
                        "function tools only)",
                    ),
                )
                self.assertEqual(result.reply.usage, USAGE)

    def test_a_response_that_is_not_finished_is_an_error_never_a_refusal(self) -> None:
        for status in ("cancelled", "in_progress", "queued"):
            for name, body in [
                ("its text so far", response([], "I won't", status=status)),
                ("its calls so far", response([GET], status=status)),
            ]:
                with self.subTest(status=status, holding=name):
                    Response.model_validate(body)  # a status the API sends, as its SDK reads it
                    result = self.trial(scripted((200, body)), REFUSAL)
                    self.assertEqual(
                        (result.outcome.status, result.outcome.code, result.outcome.reason),
                        (
                            "error",
                            "reply:bad-provider-reply",
                            f"the response's status is {status}, not completed: what it holds is not the model's "
                            "whole reply",
                        ),
                    )
                    self.assertEqual(result.reply.usage, USAGE)
        odd = self.trial(scripted((200, {**response([], "No."), "status": ["completed"]})), REFUSAL).outcome
        self.assertEqual(
            (odd.code, odd.reason),
            (
                "reply:bad-provider-reply",
                "the response's status is a list, not completed: what it holds is not the model's whole reply",
            ),
        )

    def test_calls_made_before_the_limit_still_count(self) -> None:
        body = response([GET], status="incomplete", incomplete="max_output_tokens")
        self.assertEqual(self.trial(scripted((200, body))).outcome, Outcome("pass"))


class Conversations(ResponsesTestCase):
    def converse(self, policy: Any, task_id: str) -> tuple[Result, list[Any], list[str]]:
        """The task sent to the fake model: its result, what the fake received, any body the SDK refuses."""
        invalid: list[str] = []
        fake = self.serve(responses_fake(policy, invalid))
        return run_task(self.backend(fake), self.task(task_id)), fake.received, invalid

    def test_each_step_sends_back_every_output_item_as_it_came_with_the_results(self) -> None:
        result, received, invalid = self.converse(search_then_tag, "tag-from-search")
        self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 3))
        self.assertEqual(result.reply.text, "Tagged ast_1, ast_2.")
        self.assertEqual(result.reply.usage, (3 * USAGE[0], 3 * USAGE[1]), "usage is summed over the steps")
        call = {
            "type": "function_call",
            "id": "fc_1_0",
            "call_id": "call_1_0",
            "name": "imageman_asset_search",
            "arguments": json.dumps({"query": "launch photos"}),
            "status": "completed",
        }
        self.assertEqual(
            received[1].json["input"],
            [
                {"role": "user", "content": "Tag the launch photos as approved."},
                reasoning_item(1, "Thinking it over."),
                call,
                {
                    "type": "function_call_output",
                    "call_id": "call_1_0",
                    "output": json.dumps({"assets": [{"id": "ast_1"}, {"id": "ast_2"}]}),
                },
            ],
        )

    def test_parallel_calls_each_get_their_result(self) -> None:
        result, received, invalid = self.converse(two_at_once, "compare-two")
        self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 2))
        self.assertEqual(result.reply.text, "ast_1 is 4000 px wide, ast_2 800 px.")

    def test_a_model_that_loops_is_stopped_by_max_steps(self) -> None:
        result, received, invalid = self.converse(keeps_searching, "loops")
        self.assertEqual((result.outcome.code, invalid, len(received)), ("conversation:max-steps", [], 3))

    def test_follow_up_turns_carry_the_conversation_so_far(self) -> None:
        result, received, invalid = self.converse(asks_first, "banner")
        self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 3))
        self.assertEqual(
            [item.get("role") or item["type"] for item in received[1].json["input"]],
            ["user", "reasoning", "assistant", "user"],
        )

    def test_the_fake_refuses_items_that_do_not_come_back_as_they_were_sent(self) -> None:
        sent = response([GET], reasoning="Look it up.")["output"]
        issued = {item["id"]: item for item in sent}
        thought, call = sent
        user = {"role": "user", "content": "a"}
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "{}"}
        self.assertEqual(len(responses_events([user, thought, call, answer], issued)), 3)
        cases = {
            "reasoning changed": [user, {**thought, "encrypted_content": "gAAAAB0"}, call, answer],
            "reasoning left out": [user, call, answer],
            "a call rebuilt without its id": [user, thought, {k: v for k, v in call.items() if k != "id"}, answer],
            "a call not answered": [user, thought, call, user],
            "an answer to no call": [user, thought, call, {**answer, "call_id": "call_9"}],
        }
        for name, items in cases.items():
            with self.subTest(name), self.assertRaises(Unlinked):
                responses_events(items, issued)

    def test_the_sdk_check_refuses_what_the_api_refuses(self) -> None:
        good = {"model": "m", "input": [{"role": "user", "content": "a"}], "store": False}
        check_responses_request(good)
        for name, body in [
            ("an unknown key", {**good, "messages": []}),
            ("a tool nested as chat nests it", {**good, "tools": [{"type": "function", "function": {"name": "x"}}]}),
            ("an unknown key in an item", {**good, "input": [{"role": "user", "content": "a", "name": "x"}]}),
            ("an effort the API does not know", {**good, "reasoning": {"effort": "extreme"}}),
        ]:
            with self.subTest(name), self.assertRaises(ValueError):
                check_responses_request(body)


class FakeIsFaithful(TempDirTestCase):
    def test_the_openai_sdk_reads_the_fake_responses(self) -> None:
        replies = [
            response([SEARCH, GET], "Looking.", reasoning="Two lookups."),
            response([], refusal="I can't help with that."),
            response([], "I can", status="incomplete", incomplete="max_output_tokens"),
            failed("server_error", "The model failed to generate a response."),
        ]
        for reply in replies:
            Response.model_validate(reply)
        fake = self.serve(scripted(*[(200, reply) for reply in replies]))
        client = openai.OpenAI(base_url=fake.url("/v1"), api_key="k", max_retries=0)
        parsed = [client.responses.create(model="m", input="hi") for _ in replies]
        self.assertEqual(
            [item.type for item in parsed[0].output], ["reasoning", "message", "function_call", "function_call"]
        )
        self.assertEqual((parsed[0].output_text, parsed[0].output[2].name), ("Looking.", "imageman_asset_search"))
        self.assertEqual(parsed[1].output[0].content[0].type, "refusal")
        self.assertEqual((parsed[2].status, parsed[2].incomplete_details.reason), ("incomplete", "max_output_tokens"))
        self.assertEqual((parsed[3].status, parsed[3].error.code), ("failed", "server_error"))
        self.assertEqual((parsed[0].usage.input_tokens, parsed[0].usage.output_tokens), USAGE)

    def test_the_openai_sdk_reads_the_fake_errors(self) -> None:
        fake = self.serve(scripted(openai_error(401, "Incorrect API key provided")))
        client = openai.OpenAI(base_url=fake.url("/v1"), api_key="k", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            client.responses.create(model="m", input="hi")


class Choosing(TempDirTestCase):
    def test_it_is_chosen_by_name_only_as_its_settings_are_the_openai_backends(self) -> None:
        for name, argv, environ, expected in [
            ("named", [], {"EVAL_BACKEND": NAME, "EVAL_MODEL": "m", "OPENAI_API_KEY": "sk-1234"}, NAME),
            ("named by flag", ["--backend", NAME, "--model", "m"], {}, NAME),
            ("a model and an OpenAI key: openai", [], {"EVAL_MODEL": "m", "OPENAI_API_KEY": "sk-1234"}, "openai"),
            (
                "a model and an OpenAI URL: openai",
                [],
                {"EVAL_MODEL": "m", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
                "openai",
            ),
            (
                "a temperature with a key: openai",
                [],
                {"EVAL_MODEL": "m", "OPENAI_API_KEY": "sk-1", "EVAL_TEMPERATURE": "1"},
                "openai",
            ),
        ]:
            with self.subTest(name):
                self.assertEqual(configure(argv, environ)[1], expected)
        with self.assertRaises(ConfigError) as caught:
            configure([], {"EVAL_MODEL": "m"})
        self.assertEqual(
            str(caught.exception),
            "EVAL_MODEL: read by the openai, anthropic and gemini backends alike;"
            " choose one with EVAL_BACKEND (or --backend)",
        )
