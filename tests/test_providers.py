"""The openai and anthropic backends against the providers' loopback fakes, and the fakes against the official SDKs."""

from __future__ import annotations

import hashlib
import json
import os
import unittest
from http.server import BaseHTTPRequestHandler
from typing import Any

import anthropic
import openai

from backends.toolnames import ToolNames as ToolNamesTable
from harness.records import Result
from harness.running import run_task
from tests.providers import (
    anthropic_error,
    anthropic_message,
    canned_calls,
    fake_anthropic,
    fake_openai,
    openai_completion,
    openai_error,
    provider_name,
    user_prompt,
)
from tests.support import (
    LoopbackAgent,
    Received,
    TempDirTestCase,
    backend_for,
    canonical_task,
    canonical_task_data,
    clean_env,
    run_cli,
    send_json,
)

TOOLS = canonical_task_data()["tools"]
ALL_PASS = "10/10 PASS at 100% (gate 80%)"


def scripted(*replies: tuple[int, dict[str, Any]]) -> Any:
    """Answer successive requests with these (status, body); the last one repeats. An error says to retry at once."""
    count = [0]

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        status, body = replies[min(count[0], len(replies) - 1)]
        count[0] += 1
        send_json(handler, body, status, {} if status < 300 else {"Retry-After": "0"})

    return respond


class ProviderTestCase(TempDirTestCase):
    def run_openai(self, fake: LoopbackAgent, *args: str, **env: str) -> tuple[str, str, int]:
        settings = {"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": fake.url("/v1"), "EVAL_MODEL": "m", **env}
        return run_cli(*args, env=clean_env(**settings), cwd=self.tmp)

    def run_anthropic(self, fake: LoopbackAgent, *args: str, **env: str) -> tuple[str, str, int]:
        settings = {"EVAL_BACKEND": "anthropic", "ANTHROPIC_BASE_URL": fake.url(""), "EVAL_MODEL": "claude-x", **env}
        return run_cli(*args, env=clean_env(**settings), cwd=self.tmp)

    def results(self) -> dict[str, Any]:
        return self.read_json("eval-results.json")

    def trial(self, provider: str, respond: Any, task_id: str = "asset-get-details", **env: str) -> Result:
        """A task sent once, in this process, to a provider's fake answering as `respond` says."""
        base = {
            "openai": ("OPENAI_BASE_URL", "/v1"),
            "openai-responses": ("OPENAI_BASE_URL", "/v1"),
            "anthropic": ("ANTHROPIC_BASE_URL", ""),
            "gemini": ("GOOGLE_GEMINI_BASE_URL", ""),
        }[provider]
        url = self.serve(respond).url(base[1])
        backend = backend_for({"EVAL_BACKEND": provider, base[0]: url, "EVAL_MODEL": "m", **env})
        self.addCleanup(backend.transport.close)
        return run_task(backend, canonical_task(task_id))

    def openai_trial(self, respond: Any) -> Result:
        """asset-get-details sent once, in this process, to the OpenAI fake answering as `respond` says."""
        return self.trial("openai", respond)

    def one_task(self, category: str = "asset.get") -> str:
        data = canonical_task_data()
        data["tasks"] = [task for task in data["tasks"] if task["category"] == category]
        return self.write_json("one.json", data)


class OpenAI(ProviderTestCase):
    def test_the_canonical_tasks_pass_end_to_end(self) -> None:
        fake = self.serve(fake_openai)
        stdout, stderr, code = self.run_openai(fake, OPENAI_API_KEY="sk-test-1")
        self.assertEqual((stderr, code), ("", 0))
        headline = stdout.splitlines()[-1]
        self.assertEqual(headline, f"{ALL_PASS} · 1200 tokens in, 300 out, " + headline.split(", ")[-1])
        self.assertEqual(len(fake.received), 10)
        self.assertEqual({r.path for r in fake.received}, {"/v1/chat/completions"})
        self.assertEqual(fake.received[0].headers["Authorization"], "Bearer sk-test-1")
        doc = self.results()
        self.assertEqual((doc["usage"]["inputTokens"], doc["usage"]["outputTokens"]), (1200, 300))
        self.assertEqual(doc["results"][0]["trialResults"][0]["usage"], {"inputTokens": 120, "outputTokens": 30})
        self.assertEqual(doc["results"][0]["trialResults"][0]["toolCalls"][0]["name"], "imageman.asset.search")
        self.assertEqual(doc["results"][9]["trialResults"][0]["text"], "I can't share that.")
        self.assertEqual((doc["manifest"]["backendSettings"]["model"], doc["manifest"]["backend"]), ("m", "openai"))
        self.assertNotIn("sk-test-1", stdout + json.dumps(doc))

    def test_the_request_carries_the_tools_translated_and_nothing_of_the_answer_key(self) -> None:
        fake = self.serve(fake_openai)
        self.run_openai(fake)
        prompt = canonical_task_data()["tasks"][0]["prompt"]
        # The first task's request, whichever of the run's concurrent requests reached the fake first.
        body = next(r.json for r in fake.received if prompt in json.dumps(r.json["messages"]))
        self.assertEqual(set(body), {"model", "messages", "tools", "tool_choice", "max_completion_tokens"})
        self.assertEqual((body["model"], body["tool_choice"], body["max_completion_tokens"]), ("m", "auto", 1024))
        self.assertEqual(body["messages"], [{"role": "user", "content": prompt}])
        self.assertEqual(
            body["tools"],
            [
                {
                    "type": "function",
                    "function": {
                        "name": provider_name(t["name"]),
                        "description": t["description"],
                        "parameters": t["inputSchema"],
                    },
                }
                for t in TOOLS
            ],
        )
        self.assertNotIn("Authorization", fake.received[0].headers, "no key, no bearer: keyless local servers work")
        self.assertNotIn("requiredArgs", fake.received[0].body.decode())

    def test_the_system_prompt_comes_from_the_task_file_or_a_file_and_only_its_hash_is_recorded(self) -> None:
        data = canonical_task_data()
        data["system"] = "You are Imageman's assistant."
        tasks = self.write_json("t.json", data)
        fake = self.serve(fake_openai)
        self.run_openai(fake, "--tasks", tasks, "--category", "safety")
        self.assertEqual(
            fake.received[-1].json["messages"][0], {"role": "system", "content": "You are Imageman's assistant."}
        )
        with open(os.path.join(self.tmp, "system.txt"), "w") as f:
            f.write("Replacement prompt.")
        self.run_openai(
            fake, "--tasks", tasks, "--category", "safety", EVAL_SYSTEM_PROMPT_FILE="system.txt", EVAL_TEMPERATURE="0.7"
        )
        self.assertEqual(fake.received[-1].json["messages"][0], {"role": "system", "content": "Replacement prompt."})
        self.assertEqual(fake.received[-1].json["temperature"], 0.7)
        doc = self.results()
        self.assertEqual(doc["manifest"]["systemPromptSha256"], hashlib.sha256(b"Replacement prompt.").hexdigest())
        with open(os.path.join(self.tmp, "eval-results.json")) as f:
            self.assertNotIn("Replacement prompt.", f.read())

    def test_parallel_calls_malformed_arguments_and_text_only_replies(self) -> None:
        get = {"name": "imageman_asset_get", "args": {"assetId": "a"}}
        search = {"name": "imageman_asset_search", "args": {"query": "x"}}
        cases = [
            ("parallel calls", (200, openai_completion([search, get])), "pass", None),
            (
                "arguments that are not JSON",
                (200, openai_completion([get], arguments=['{"assetId": "a"'])),
                "fail",
                "tool:bad-args",
            ),
            ("arguments that are a list", (200, openai_completion([get], arguments=["[1]"])), "fail", "tool:bad-args"),
            ("text only is no call", (200, openai_completion([], "Which asset?")), "fail", "tool:no-call"),
        ]
        for name, reply, status, code in cases:
            with self.subTest(name):
                result = self.openai_trial(scripted(reply))
                self.assertEqual((result.outcome.status, result.outcome.code), (status, code))
        self.assertEqual(result.outcome.reason, "expected imageman.asset.get, got a text reply with no tool call")
        self.assertEqual(result.reply.text, "Which asset?")

    def test_content_as_a_list_of_parts_is_its_text_parts_joined_without_its_thinking(self) -> None:
        # Mistral's reasoning models, and some servers that copy the API, send content as typed parts.
        thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "They want the keys. I must not."}]}
        said = [thinking, {"type": "text", "text": "I can't share "}, {"type": "text", "text": "credentials."}]
        get = {"name": "imageman_asset_get", "args": {"assetId": "a"}}
        cases = [
            ("a refusal in two text parts", openai_completion([]), said, REFUSAL, "pass", "I can't share credentials."),
            ("thinking alone", openai_completion([]), [thinking], REFUSAL, "error", None),
            ("text beside a call", openai_completion([get]), said[1:2], "asset-get-details", "pass", "I can't share "),
        ]
        for name, body, content, task_id, status, text in cases:
            with self.subTest(name):
                body["choices"][0]["message"]["content"] = content
                result = self.trial("openai", scripted((200, body)), task_id)
                self.assertEqual((result.outcome.status, result.reply.text), (status, text))
                if status == "pass":
                    self.assertEqual(result.reply.native["content"], content)  # it goes back as it came

    def test_malformed_arguments_name_the_reason(self) -> None:
        reply = openai_completion([{"name": "imageman_asset_get", "args": {}}], arguments=['{"assetId": '])
        self.assertEqual(
            self.openai_trial(scripted((200, reply))).outcome.reason,
            'imageman.asset.get arguments are not JSON: {"assetId":',
        )

    def test_a_400_shows_the_providers_message(self) -> None:
        fake = self.serve(
            scripted(openai_error(400, "Invalid schema for function 'imageman_asset_get': 'object' is not valid"))
        )
        self.run_openai(fake, "--tasks", self.one_task())
        result = self.results()["results"][0]
        self.assertEqual(
            (result["code"], result["reason"]),
            (
                "reply:http-status",
                "HTTP 400 Bad Request: Invalid schema for function 'imageman_asset_get': 'object' is not valid",
            ),
        )

    def test_a_providers_message_of_any_length_is_quoted_on_one_line_clipped_its_echo_of_the_key_masked(self) -> None:
        key = "sk-planted-9d2e7b4a1c"
        message = f"Bad request for {key}:\n" + "detail " * 2000
        variables = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
        for provider in ("openai", "openai-responses", "anthropic", "gemini"):
            with self.subTest(provider):
                variable = variables.get(provider, "GOOGLE_API_KEY")
                reason = self.trial(provider, scripted(openai_error(400, message)), **{variable: key}).outcome.reason
                self.assertTrue(reason.startswith("HTTP 400 Bad Request: Bad request for ***: detail detail"), reason)
                self.assertTrue(reason.endswith("..."), reason[-40:])
                self.assertLessEqual(len(reason), len("HTTP 400 Bad Request: ") + 500)

    def test_a_rejected_key_stops_the_run_after_the_first_task_with_exit_3(self) -> None:
        fake = self.serve(scripted(openai_error(401, "Incorrect API key provided: sk-bad.")))
        _, stderr, code = self.run_openai(fake, OPENAI_API_KEY="sk-bad")
        self.assertEqual(code, 3)
        self.assertEqual(
            stderr,
            f"eval_agent: error: OPENAI_API_KEY was rejected by {fake.url('/v1/chat/completions')}: "
            "HTTP 401 Unauthorized: Incorrect API key provided: ***.\n",  # the provider echoed the key: masked
        )
        self.assertEqual(len(fake.received), 1)
        self.assertEqual((len(self.results()["results"]), len(self.results()["notRun"])), (1, 9))

    def test_429_is_retried(self) -> None:
        fake = self.serve(
            scripted(
                openai_error(429, "Rate limit reached"),
                (200, openai_completion([{"name": "imageman_asset_get", "args": {"assetId": "a"}}])),
            )
        )
        _, _, code = self.run_openai(fake, "--tasks", self.one_task())
        self.assertEqual((code, self.results()["results"][0]["trialResults"][0]["attempts"]), (0, 2))


class Anthropic(ProviderTestCase):
    def test_the_canonical_tasks_pass_end_to_end_with_the_documented_request(self) -> None:
        data = canonical_task_data()
        data["system"] = "You are Imageman's assistant."
        fake = self.serve(fake_anthropic)
        stdout, stderr, code = self.run_anthropic(
            fake, "--tasks", self.write_json("t.json", data), ANTHROPIC_API_KEY="ak-test-2"
        )
        self.assertEqual((stderr, code), ("", 0))
        self.assertTrue(stdout.splitlines()[-1].startswith(f"{ALL_PASS} · 2000 tokens in, 400 out, "))
        received = next(r for r in fake.received if user_prompt(r) == data["tasks"][0]["prompt"])
        self.assertEqual(received.path, "/v1/messages")
        self.assertEqual(
            (received.headers["x-api-key"], received.headers["anthropic-version"]), ("ak-test-2", "2023-06-01")
        )
        body = received.json
        self.assertEqual(set(body), {"model", "max_tokens", "system", "messages", "tools"})
        self.assertEqual(
            (body["model"], body["max_tokens"], body["system"]), ("claude-x", 1024, "You are Imageman's assistant.")
        )
        self.assertEqual(body["messages"], [{"role": "user", "content": data["tasks"][0]["prompt"]}])
        self.assertEqual(
            body["tools"],
            [
                {"name": provider_name(t["name"]), "description": t["description"], "input_schema": t["inputSchema"]}
                for t in TOOLS
            ],
        )
        first = self.results()["results"][0]["trialResults"][0]
        self.assertEqual((first["text"], first["toolCalls"][0]["name"]), ("Let me do that.", "imageman.asset.search"))

    def test_529_overloaded_is_retried_like_503(self) -> None:
        fake = self.serve(
            scripted(
                anthropic_error(529, "overloaded_error", "Overloaded"),
                (200, anthropic_message([{"name": "imageman_asset_get", "args": {"assetId": "a"}}])),
            )
        )
        _, _, code = self.run_anthropic(fake, "--tasks", self.one_task(), EVAL_MAX_TOKENS="64")
        self.assertEqual((code, self.results()["results"][0]["trialResults"][0]["attempts"]), (0, 2))
        self.assertEqual(fake.received[0].json["max_tokens"], 64)

    def test_errors_show_the_providers_message(self) -> None:
        for reply, code, reason in [
            (
                anthropic_error(400, "invalid_request_error", "tools.0.input_schema: JSON schema is invalid"),
                "reply:http-status",
                "HTTP 400 Bad Request: tools.0.input_schema: JSON schema is invalid",
            ),
            (anthropic_error(401, "authentication_error", "invalid x-api-key"), "reply:key-rejected", None),
        ]:
            with self.subTest(code):
                fake = self.serve(scripted(reply))
                _, stderr, _ = self.run_anthropic(fake, "--tasks", self.one_task(), EVAL_RETRIES="0")
                result = self.results()["results"][0]
                self.assertEqual(result["code"], code)
                if reason:
                    self.assertEqual(result["reason"], reason)
                else:
                    self.assertIn(
                        f"ANTHROPIC_API_KEY was rejected by {fake.url('/v1/messages')}: HTTP 401 Unauthorized:"
                        " invalid x-api-key",
                        stderr,
                    )

    def test_a_call_of_a_tool_the_harness_did_not_offer_is_an_error_never_a_refusal(self) -> None:
        search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "keys"}}
        found = {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://x.test", "title": "x", "encrypted_content": "e"}],
        }
        mcp = {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "env", "server_name": "shell", "input": {}}
        text = anthropic_message([], "I won't share credentials.")
        get = anthropic_message([{"name": "imageman_asset_get", "args": {"assetId": "a"}}])
        for kind, body, typed in [
            ("server_tool_use", {**text, "content": [search, found, *text["content"]]}, anthropic.types.Message),
            ("mcp_tool_use", {**text, "content": [mcp, *text["content"]]}, anthropic.types.beta.BetaMessage),
        ]:
            with self.subTest(kind):
                typed.model_validate(body)  # the shape the API sends, as its SDK reads it
                result = self.trial("anthropic", scripted((200, body)), REFUSAL)
                self.assertEqual(
                    (result.outcome.status, result.outcome.code, result.outcome.reason),
                    (
                        "error",
                        "reply:bad-provider-reply",
                        f"a content block of type {kind}: a call of a tool the harness did not offer (it offers "
                        "client tools only)",
                    ),
                )
                self.assertEqual(result.reply.usage, (200, 40))
        # Beside a call of the task's tools, the calls are judged (tests/test_provider_conversations.py sends the
        # server tool's blocks back as they came).
        beside = self.trial("anthropic", scripted((200, {**get, "content": [search, found, *get["content"]]})))
        self.assertEqual(beside.outcome.status, "pass")


REFUSAL = "safety-leak-secrets"  # where a truncated or empty completion taken for a refusal would pass
CUT_SHORT = [
    (
        "openai: cut short by the token limit",
        "openai",
        openai_completion([], None, finish_reason="length"),
        "reply:truncated",
        "the completion was cut short (finish_reason length) before any tool call",
    ),
    (
        "openai: no text, no call",
        "openai",
        openai_completion([], None),
        "reply:empty",
        "a blank completion: no tool call, no text",
    ),
    (
        "openai: blank text",
        "openai",
        openai_completion([], " \n"),
        "reply:empty",
        "a blank completion: no tool call, no text",
    ),
    (
        "openai: zero-width text",
        "openai",
        openai_completion([], "\u200b\ufeff"),
        "reply:empty",
        "a blank completion: no tool call, no text",
    ),
    (
        "openai: the text of a missing value",
        "openai",
        openai_completion([], "undefined"),
        "reply:empty",
        "a blank completion: no tool call, no text",
    ),
    (
        "openai: combining marks on no letter",
        "openai",
        openai_completion([], "\u0301\u20dd"),
        "reply:empty",
        "a blank completion: no tool call, no text",
    ),
    (
        "openai: finish_reason tool_calls without a call",
        "openai",
        openai_completion([], None, finish_reason="tool_calls"),
        "reply:bad-provider-reply",
        "finish_reason tool_calls, but the message has no tool_calls",
    ),
    (
        "openai: finish_reason tool_calls without a call, with text",
        "openai",
        openai_completion([], "Let me look that up.", finish_reason="tool_calls"),
        "reply:bad-provider-reply",
        "finish_reason tool_calls, but the message has no tool_calls",
    ),
    (
        "openai: stopped by an error upstream, its text so far kept (OpenRouter's finish_reason error)",
        "openai",
        openai_completion([], "I can", finish_reason="error"),
        "reply:provider-error",
        "the completion stopped on an error (finish_reason error) before any tool call",
    ),
    (
        "openai: a call in the deprecated function_call, its text kept",
        "openai",
        {
            **openai_completion([], "I won't.", finish_reason="function_call"),
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": "I won't.",
                        "function_call": {"name": "imageman_asset_get", "arguments": "{}"},
                    },
                    "finish_reason": "function_call",
                }
            ],
        },
        "reply:bad-provider-reply",
        "a call in function_call (the deprecated functions API), not in tool_calls",
    ),
    (
        "anthropic: cut short by the context window",
        "anthropic",
        anthropic_message([], "Let me look", stop_reason="model_context_window_exceeded"),
        "reply:truncated",
        "the message was cut short (stop_reason model_context_window_exceeded) before any tool use",
    ),
    (
        "anthropic: a turn paused by the API",
        "anthropic",
        anthropic_message([], "Searching the web", stop_reason="pause_turn"),
        "reply:truncated",
        "the turn was paused (stop_reason pause_turn) before any tool use; the harness does not resume it",
    ),
    (
        "anthropic: stop_reason tool_use without a tool_use block, its text kept",
        "anthropic",
        anthropic_message([], "Let me look that up.", stop_reason="tool_use"),
        "reply:bad-provider-reply",
        "stop_reason tool_use, but the message has no tool_use block",
    ),
    (
        "anthropic: NUL text",
        "anthropic",
        anthropic_message([], "\x00\x00"),
        "reply:empty",
        "a blank message: no tool use, no text",
    ),
    (
        "anthropic: cut short by max_tokens",
        "anthropic",
        anthropic_message([], "Let me look", stop_reason="max_tokens"),
        "reply:truncated",
        "the message was cut short (stop_reason max_tokens) before any tool use",
    ),
    (
        "anthropic: no content",
        "anthropic",
        anthropic_message([]),
        "reply:empty",
        "a blank message: no tool use, no text",
    ),
]


class CutShortOrEmpty(ProviderTestCase):
    def test_a_truncated_or_empty_completion_is_an_error_never_a_refusal(self) -> None:
        for name, provider, body, code, reason in CUT_SHORT:
            with self.subTest(name):
                result = self.trial(provider, scripted((200, body)), REFUSAL)
                self.assertEqual(
                    (result.outcome.status, result.outcome.code, result.outcome.reason), ("error", code, reason)
                )

    def test_calls_made_before_the_limit_still_count(self) -> None:
        get = {"name": "imageman_asset_get", "args": {"assetId": "a"}}
        result = self.trial("openai", scripted((200, openai_completion([get], finish_reason="length"))))
        self.assertEqual(result.outcome.status, "pass")

    def test_a_refusal_the_model_states_passes_a_refusal_task(self) -> None:
        body = openai_completion([])
        body["choices"][0]["message"].update(content=None, refusal="I can't help with that.")
        self.assertEqual(self.trial("openai", scripted((200, body)), REFUSAL).outcome.status, "pass")
        refusal = anthropic_message([], stop_reason="refusal")
        self.assertEqual(self.trial("anthropic", scripted((200, refusal)), REFUSAL).outcome.status, "pass")

    def test_the_openai_token_limit_is_sent_under_the_name_the_server_knows(self) -> None:
        fake = self.serve(scripted((200, openai_completion([], "ok"))))
        for env, field in [({}, "max_completion_tokens"), ({"EVAL_MAX_TOKENS_FIELD": "max_tokens"}, "max_tokens")]:
            with self.subTest(field):
                backend = backend_for(
                    {
                        "EVAL_BACKEND": "openai",
                        "OPENAI_BASE_URL": fake.url("/v1"),
                        "EVAL_MODEL": "m",
                        "EVAL_MAX_TOKENS": "64",
                        **env,
                    }
                )
                self.addCleanup(backend.transport.close)
                run_task(backend, canonical_task(REFUSAL))
                body = fake.received[-1].json
                self.assertEqual(
                    (body[field], {"max_tokens", "max_completion_tokens"} - {field} & set(body)), (64, set())
                )


class ToolNames(ProviderTestCase):
    def test_a_long_name_is_sent_cut_to_the_64_characters_providers_take_and_read_back(self) -> None:
        name = "imageman." + "x" * 80
        table = ToolNamesTable([tool["name"] for tool in TOOLS] + [name])
        self.assertEqual(table.provider(name), "imageman_" + "x" * 55)
        self.assertEqual(table.original("imageman_" + "x" * 55), name)

    def test_a_name_that_does_not_map_is_a_configuration_error_before_any_request(self) -> None:
        data = canonical_task_data()
        data["tools"].append({"name": "imageman_asset_get", "inputSchema": {"type": "object"}})
        fake = self.serve(fake_openai)
        path = self.write_json("t.json", data)
        stdout, stderr, code = self.run_openai(fake, "--tasks", path)
        self.assertEqual((stdout, code), ("", 2))
        self.assertTrue(
            stderr.startswith(
                f'eval_agent: error: {path}: tools[8].name: "imageman_asset_get" and "imageman.asset.get" (tools[1])'
            ),
            stderr,
        )
        self.assertEqual(fake.received, [])


class FakesAreFaithful(TempDirTestCase):
    """The official SDKs parse every canned response of the fakes: they are the shapes providers send."""

    def test_the_openai_sdk_reads_the_fake_completions(self) -> None:
        calls = canned_calls(canonical_task_data()["tasks"][0]["prompt"])
        replies = [
            openai_completion(calls + calls),
            openai_completion([], "I can't share that."),
            openai_completion(calls, arguments=["{bad"]),
        ]
        fake = self.serve(scripted(*[(200, reply) for reply in replies]))
        client = openai.OpenAI(base_url=fake.url("/v1"), api_key="k", max_retries=0)
        parsed = [
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}]) for _ in replies
        ]
        self.assertEqual(
            [c.function.name for c in parsed[0].choices[0].message.tool_calls], ["imageman_asset_search"] * 2
        )
        self.assertEqual(
            (parsed[1].choices[0].message.content, parsed[1].choices[0].message.tool_calls),
            ("I can't share that.", None),
        )
        self.assertEqual(parsed[2].choices[0].message.tool_calls[0].function.arguments, "{bad")
        self.assertEqual(parsed[0].usage.prompt_tokens, 120)

    def test_the_openai_sdk_reads_the_fake_errors(self) -> None:
        errors = [
            (openai_error(400, "Invalid schema"), openai.BadRequestError),
            (openai_error(401, "Incorrect API key provided"), openai.AuthenticationError),
            (openai_error(429, "Rate limit reached"), openai.RateLimitError),
        ]
        fake = self.serve(scripted(*[reply for reply, _ in errors]))
        client = openai.OpenAI(base_url=fake.url("/v1"), api_key="k", max_retries=0)
        for reply, kind in errors:
            with self.assertRaises(kind) as caught:
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            self.assertIn(reply[1]["error"]["message"], str(caught.exception))

    def test_the_anthropic_sdk_reads_the_fake_messages_and_errors(self) -> None:
        calls = canned_calls(canonical_task_data()["tasks"][0]["prompt"])
        fake = self.serve(
            scripted(
                (200, anthropic_message(calls, "Let me do that.")),
                (200, anthropic_message([], "I can't share that.")),
                anthropic_error(400, "invalid_request_error", "tools.0.input_schema: JSON schema is invalid"),
                anthropic_error(401, "authentication_error", "invalid x-api-key"),
                anthropic_error(529, "overloaded_error", "Overloaded"),
            )
        )
        client = anthropic.Anthropic(base_url=fake.url(""), api_key="k", max_retries=0)

        def create() -> Any:
            return client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])

        message = create()
        self.assertEqual([block.type for block in message.content], ["text", "tool_use"])
        self.assertEqual(
            (message.content[1].name, message.content[1].input), ("imageman_asset_search", calls[0]["args"])
        )
        self.assertEqual(message.usage.input_tokens, 200)
        self.assertEqual([block.text for block in create().content], ["I can't share that."])
        for kind, status in [
            (anthropic.BadRequestError, 400),
            (anthropic.AuthenticationError, 401),
            (anthropic.APIStatusError, 529),
        ]:
            with self.assertRaises(kind) as caught:
                create()
            self.assertEqual(caught.exception.status_code, status)


if __name__ == "__main__":
    unittest.main()
