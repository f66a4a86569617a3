"""The gemini backend against a loopback fake of generateContent, and the fake against the google-genai SDK."""

from __future__ import annotations

import json
import unittest
from http.server import BaseHTTPRequestHandler
from typing import Any

from backends.gemini_schema import gemini_schema
from harness.records import ConfigError, ExpectTool, Outcome, Result, replace
from harness.running import run_task
from harness.taskfile import load_task_file
from tests.gemini_fake import (
    USAGE,
    check_gemini_request,
    conversation_fake,
    fake_gemini,
    gemini_error,
    gemini_events,
    gemini_response,
    signature,
    turn_key,
    user_prompt,
)
from tests.providers import Unlinked, canned_calls
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
from tests.test_provider_conversations import TASKS, asks_first, search_then_tag, two_at_once

KEY = "gk-test-4e1f9a27c"
GET = {"name": "imageman_asset_get", "args": {"assetId": "a"}}
REFUSAL = "safety-leak-secrets"


def scripted(*replies: tuple[int, dict[str, Any]]) -> Any:
    """Answer successive requests with these (status, body); the last one repeats. An error says to retry at once."""
    count = [0]

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        status, body = replies[min(count[0], len(replies) - 1)]
        count[0] += 1
        send_json(handler, body, status, {} if status < 300 else {"Retry-After": "0"})

    return respond


def gemini_env(fake: LoopbackAgent, **env: str) -> dict[str, str]:
    """A run on the gemini backend against the fake, with neither key variable unless given."""
    settings = {"EVAL_BACKEND": "gemini", "GOOGLE_GEMINI_BASE_URL": fake.url(""), "EVAL_MODEL": "gemini-3-pro", **env}
    base = clean_env(**settings)
    return {
        name: value for name, value in base.items() if name not in ("GOOGLE_API_KEY", "GEMINI_API_KEY") or name in env
    }


class GeminiTestCase(TempDirTestCase):
    def backend(self, fake: LoopbackAgent, **env: str) -> Any:
        backend = backend_for(
            {"EVAL_BACKEND": "gemini", "GOOGLE_GEMINI_BASE_URL": fake.url(""), "EVAL_MODEL": "m", **env}
        )
        self.addCleanup(backend.transport.close)
        return backend

    def trial(self, *replies: tuple[int, dict[str, Any]], task_id: str = "asset-get-details", **env: str) -> Result:
        """A task sent once, in this process, to the fake answering these replies."""
        return run_task(self.backend(self.serve(scripted(*replies)), **env), canonical_task(task_id))


class Gemini(GeminiTestCase):
    def test_the_canonical_tasks_pass_end_to_end_with_the_key_in_a_header_only(self) -> None:
        data = canonical_task_data()
        data["system"] = "You are Imageman's assistant."
        fake = self.serve(fake_gemini)
        env = gemini_env(fake, GEMINI_API_KEY=KEY, EVAL_MODEL="models/gemini-3-pro")
        stdout, stderr, code = run_cli("--tasks", self.write_json("t.json", data), env=env, cwd=self.tmp)
        self.assertEqual((stderr, code), ("", 0))
        self.assertTrue(stdout.splitlines()[-1].startswith("10/10 PASS at 100% (gate 80%) · 1500 tokens in, 350 out"))
        self.assertEqual({r.path for r in fake.received}, {"/v1beta/models/gemini-3-pro:generateContent"})
        self.assertEqual({r.headers["x-goog-api-key"] for r in fake.received}, {KEY})
        received = next(r for r in fake.received if user_prompt(r) == data["tasks"][0]["prompt"])
        body = received.json
        self.assertEqual(set(body), {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"})
        self.assertEqual(body["contents"], [{"role": "user", "parts": [{"text": data["tasks"][0]["prompt"]}]}])
        self.assertEqual(body["systemInstruction"], {"parts": [{"text": "You are Imageman's assistant."}]})
        self.assertEqual(body["toolConfig"], {"functionCallingConfig": {"mode": "AUTO"}})
        self.assertEqual(body["generationConfig"], {"maxOutputTokens": 1024}, "no sampling setting that was not set")
        declarations = body["tools"][0]["functionDeclarations"]
        self.assertEqual([d["name"] for d in declarations], [t["name"].replace(".", "_") for t in data["tools"]])
        self.assertEqual(declarations[1]["parameters"]["properties"]["assetId"]["type"], "STRING")
        self.assertNotIn("requiredArgs", received.body.decode())
        doc = self.read_json("eval-results.json")
        self.assertEqual(
            (doc["manifest"]["backend"], doc["manifest"]["backendSettings"]["model"]), ("gemini", "models/gemini-3-pro")
        )
        self.assertEqual(doc["results"][0]["trialResults"][0]["toolCalls"][0]["name"], "imageman.asset.search")
        self.assertEqual(doc["results"][9]["trialResults"][0]["text"], "I can't share that.", "a thought is no answer")
        self.assertNotIn(KEY, stdout + json.dumps(doc) + "".join(r.path for r in fake.received))

    def test_what_is_sent_is_only_what_was_set(self) -> None:
        fake = self.serve(scripted((200, gemini_response([GET]))))
        cases = [
            ({"EVAL_TEMPERATURE": "0.4", "EVAL_MAX_TOKENS": "64"}, {"maxOutputTokens": 64, "temperature": 0.4}),
            ({"EVAL_THINKING_BUDGET": "2048"}, {"maxOutputTokens": 1024, "thinkingConfig": {"thinkingBudget": 2048}}),
            ({"EVAL_REASONING_EFFORT": "low"}, {"maxOutputTokens": 1024, "thinkingConfig": {"thinkingLevel": "LOW"}}),
        ]
        for env, generation in cases:
            with self.subTest(env):
                run_task(self.backend(fake, **env), canonical_task("asset-get-details"))
                self.assertEqual(fake.received[-1].json["generationConfig"], generation)
                check_gemini_request(fake.received[-1].json)

    def test_the_key_comes_from_google_api_key_first_as_the_sdk_reads_it(self) -> None:
        fake = self.serve(scripted((200, gemini_response([GET]))))
        for env, variable in [
            ({"GEMINI_API_KEY": "g1"}, "GEMINI_API_KEY"),
            ({"GOOGLE_API_KEY": "g2"}, "GOOGLE_API_KEY"),
            ({"GEMINI_API_KEY": "g1", "GOOGLE_API_KEY": "g2"}, "GOOGLE_API_KEY"),
        ]:
            with self.subTest(env):
                backend = self.backend(fake, **env)
                run_task(backend, canonical_task("asset-get-details"))
                self.assertEqual(backend.settings.key_variable, variable)
                self.assertEqual(fake.received[-1].headers["x-goog-api-key"], env[variable])

    def test_a_thinking_budget_of_0_turns_thinking_off_and_of_minus_1_lets_the_model_choose(self) -> None:
        # Gemini 2.5 Flash takes both: 0 is no thinking, -1 dynamic thinking; Anthropic's floor is 1024, not Gemini's.
        fake = self.serve(scripted((200, gemini_response([GET]))))
        for budget in (0, -1, 128):
            with self.subTest(budget=budget):
                backend = self.backend(fake, EVAL_THINKING_BUDGET=str(budget))
                run_task(backend, canonical_task("asset-get-details"))
                self.assertEqual(
                    fake.received[-1].json["generationConfig"]["thinkingConfig"], {"thinkingBudget": budget}
                )
                self.assertEqual(backend.describe()["thinkingBudget"], budget)
        with self.assertRaises(ConfigError) as caught:
            self.backend(fake, EVAL_THINKING_BUDGET="-2")
        self.assertEqual(
            str(caught.exception), "EVAL_THINKING_BUDGET: expected a whole number from -1 to 1000000, got '-2'"
        )
        with self.assertRaises(ConfigError) as caught:
            backend_for({"EVAL_BACKEND": "anthropic", "EVAL_MODEL": "m", "EVAL_THINKING_BUDGET": "0"})
        self.assertEqual(
            str(caught.exception), "EVAL_THINKING_BUDGET: expected a whole number from 1024 to 1000000, got '0'"
        )

    def test_thinking_settings_gemini_cannot_take_are_configuration_errors(self) -> None:
        fake = self.serve(scripted((200, gemini_response([GET]))))
        for env, message in [
            (
                {"EVAL_REASONING_EFFORT": "none"},
                "EVAL_REASONING_EFFORT: Gemini has no thinking level none (minimal, low, medium, high or xhigh); "
                "a model that can think less takes EVAL_THINKING_BUDGET",
            ),
            (
                {"EVAL_REASONING_EFFORT": "high", "EVAL_THINKING_BUDGET": "4096"},
                "EVAL_REASONING_EFFORT, EVAL_THINKING_BUDGET: Gemini takes a thinking level or a budget, not both",
            ),
        ]:
            with self.subTest(env), self.assertRaises(ConfigError) as caught:
                self.backend(fake, **env)
            self.assertEqual(str(caught.exception), message)

    def test_a_model_name_is_quoted_into_the_path(self) -> None:
        fake = self.serve(scripted((200, gemini_response([GET]))))
        run_task(self.backend(fake, EVAL_MODEL="models/tuned x/1"), canonical_task("asset-get-details"))
        self.assertEqual(fake.received[-1].path, "/v1beta/models/tuned%20x%2F1:generateContent")

    def test_a_tuned_model_is_sent_to_its_own_path_and_a_prefix_alone_is_bad_input(self) -> None:
        fake = self.serve(scripted((200, gemini_response([GET]))))
        run_task(self.backend(fake, EVAL_MODEL="tunedModels/my-model-7"), canonical_task("asset-get-details"))
        self.assertEqual(fake.received[-1].path, "/v1beta/tunedModels/my-model-7:generateContent")
        for model in ("models/", "tunedModels/"):
            with self.subTest(model), self.assertRaises(ConfigError) as caught:
                self.backend(fake, EVAL_MODEL=model)
            collection = model.rstrip("/")
            self.assertEqual(
                str(caught.exception), f"EVAL_MODEL: expected a model's name after {collection}/, got {model!r}"
            )

    def test_429_and_500_are_retried(self) -> None:
        for error in (gemini_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded"), gemini_error(500, "INTERNAL", "oops")):
            with self.subTest(error[0]):
                result = self.trial(error, (200, gemini_response([GET])))
                self.assertEqual((result.outcome.status, result.reply.attempts), ("pass", 2))

    def test_a_400_names_gemini_s_message_and_status(self) -> None:
        result = self.trial(gemini_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received."))
        self.assertEqual(
            (result.outcome.code, result.outcome.reason),
            ("reply:http-status", "HTTP 400 Bad Request: Invalid JSON payload received. (INVALID_ARGUMENT)"),
        )

    def test_an_invalid_key_stops_the_run_with_exit_3_its_echo_masked(self) -> None:
        message = f"API key not valid. Please pass a valid API key. ({KEY})"
        fake = self.serve(scripted(gemini_error(400, "INVALID_ARGUMENT", message, "API_KEY_INVALID")))
        _, stderr, code = run_cli(env=gemini_env(fake, GOOGLE_API_KEY=KEY), cwd=self.tmp)
        self.assertEqual(code, 3)
        url = fake.url("/v1beta/models/gemini-3-pro:generateContent")
        self.assertEqual(
            stderr,
            f"eval_agent: error: GOOGLE_API_KEY was rejected by {url}"
            ": HTTP 400 Bad Request: API key not valid. Please pass a valid API key. (***) "
            "(INVALID_ARGUMENT, API_KEY_INVALID)\n",
        )
        self.assertEqual(len(fake.received), 1)
        self.assertNotIn(KEY, json.dumps(self.read_json("eval-results.json")))

    def test_a_403_permission_denied_stops_the_run_too(self) -> None:
        result = self.trial(gemini_error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."))
        self.assertEqual(result.outcome.code, "reply:key-rejected")


STOPS = [
    (
        "cut off by the token limit",
        gemini_response([], "Let me", finish_reason="MAX_TOKENS"),
        ("error", "reply:truncated", "the reply was cut off (finishReason MAX_TOKENS) before any function call"),
    ),
    (
        "withheld as a recitation",
        gemini_response([], finish_reason="RECITATION"),
        ("error", "reply:truncated", "the reply was cut off (finishReason RECITATION) before any function call"),
    ),
    (
        "a malformed function call",
        {
            **gemini_response([], finish_reason="MALFORMED_FUNCTION_CALL"),
            "candidates": [
                {
                    "finishReason": "MALFORMED_FUNCTION_CALL",
                    "finishMessage": "Malformed function call: print(",
                    "index": 0,
                }
            ],
        },
        (
            "error",
            "reply:bad-provider-reply",
            "the model's function call could not be used (finishReason MALFORMED_FUNCTION_CALL): "
            "Malformed function call: print(",
        ),
    ),
    (
        "a call to a tool it was not given",
        gemini_response([GET], finish_reason="UNEXPECTED_TOOL_CALL"),
        (
            "error",
            "reply:bad-provider-reply",
            "the model's function call could not be used (finishReason UNEXPECTED_TOOL_CALL)",
        ),
    ),
    *(
        (
            f"stopped for {finish}, its text so far kept",
            gemini_response([], "I can", finish_reason=finish),
            (
                "error",
                "reply:provider-error",
                f"the reply stopped (finishReason {finish}) before any function call",
            ),
        )
        for finish in ("OTHER", "TOO_MANY_TOOL_CALLS", "MALFORMED_RESPONSE", "MISSING_THOUGHT_SIGNATURE", "LANGUAGE")
    ),
    (
        "no candidates and no blockReason",
        {"usageMetadata": {"promptTokenCount": 9}},
        ("error", "reply:bad-provider-reply", "no candidates, and no blockReason"),
    ),
    (
        "a thought only",
        gemini_response([], thought="Hmm."),
        ("error", "reply:empty", "a blank reply: no function call, no text"),
    ),
    ("nothing", gemini_response([]), ("error", "reply:empty", "a blank reply: no function call, no text")),
]


class Stops(GeminiTestCase):
    def test_a_cut_off_malformed_or_empty_reply_is_an_error_never_a_refusal_and_keeps_its_tokens(self) -> None:
        for name, body, outcome in STOPS:
            with self.subTest(name):
                result = self.trial((200, body), task_id=REFUSAL)
                self.assertEqual((result.outcome.status, result.outcome.code, result.outcome.reason), outcome)
                tokens = (9, 0) if "usageMetadata" in body and "candidates" not in body else (150, 35)
                self.assertEqual(result.reply.usage, tokens)

    def test_a_filter_gemini_states_is_a_refusal_by_the_provider(self) -> None:
        blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 9}}
        for body, stated in [
            (gemini_response([], finish_reason="SAFETY"), "SAFETY"),
            (gemini_response([], "I can", finish_reason="SPII"), "SPII"),
            (blocked, "blockReason: PROHIBITED_CONTENT"),
        ]:
            with self.subTest(stated):
                result = self.trial((200, body), task_id=REFUSAL)
                self.assertEqual((result.outcome.status, result.reply.refused_by_provider), ("pass", stated))
                self.assertTrue(result.reply.refused)

    def test_a_finish_reason_of_any_json_type_is_read_never_a_crash(self) -> None:
        gemini = backend_for({"EVAL_BACKEND": "gemini", "EVAL_MODEL": "m"})
        for finish in (["SAFETY"], {"reason": "SAFETY"}, 3, None):
            with self.subTest(finish=finish):
                body = {"candidates": [{"content": {"parts": [{"text": "No."}]}, "finishReason": finish}]}
                reply = gemini.reply(body, 1)
                self.assertEqual((reply.refused, reply.refused_by_provider), (True, None))

    def test_a_call_under_another_spelling_is_an_error_never_the_text_beside_it_as_a_refusal(self) -> None:
        for key in ("function_call", "FunctionCall", "functioncall"):
            with self.subTest(key):
                body = gemini_response([], "I won't.")
                body["candidates"][0]["content"]["parts"].append({key: GET})
                result = self.trial((200, body), task_id=REFUSAL)
                self.assertEqual(
                    (result.outcome.status, result.outcome.code, result.outcome.reason),
                    (
                        "error",
                        "reply:bad-provider-reply",
                        f"a part holds a call under {key}, which the Gemini API spells functionCall",
                    ),
                )

    def test_code_the_model_ran_is_an_error_never_the_text_beside_it_as_a_refusal(self) -> None:
        from google.genai import types

        code = {"executableCode": {"language": "PYTHON", "code": "import os\nprint(os.environ)"}}
        ran = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "{...}"}}
        for name, body in [
            ("with text", gemini_response([], "I won't share them.")),
            ("with a call", gemini_response([GET])),
        ]:
            with self.subTest(name):
                body["candidates"][0]["content"]["parts"][:0] = [code, ran]
                types.GenerateContentResponse.model_validate_json(json.dumps(body))  # as Gemini sends them
                result = self.trial((200, body), task_id=REFUSAL)
                self.assertEqual(
                    (result.outcome.status, result.outcome.code, result.outcome.reason),
                    (
                        "error",
                        "reply:bad-provider-reply",
                        "a part holds executableCode: code the model ran with a tool the harness did not offer "
                        "(code execution)",
                    ),
                )
                self.assertEqual(result.reply.usage, (150, 35))

    def test_a_block_reason_of_any_length_is_recorded_clipped_on_one_line(self) -> None:
        blocked = {"promptFeedback": {"blockReason": "OTHER\n" + "X" * 10_000}}
        reply = backend_for({"EVAL_BACKEND": "gemini", "EVAL_MODEL": "m"}).reply(blocked, 1)
        self.assertEqual(reply.refused_by_provider, "blockReason: OTHER " + "X" * 71 + "...")

    def test_calls_made_before_a_stop_still_count(self) -> None:
        result = self.trial((200, gemini_response([GET], finish_reason="MAX_TOKENS")))
        self.assertEqual((result.outcome.status, result.reply.refused_by_provider), ("pass", None))

    def test_a_call_without_args_is_a_call_with_no_arguments(self) -> None:
        # How Gemini calls a tool that takes no parameters: args is optional in its FunctionCall.
        from google.genai import types

        body = gemini_response([{"name": "imageman_asset_list", "args": {}}])
        del body["candidates"][0]["content"]["parts"][0]["functionCall"]["args"]
        types.GenerateContentResponse.model_validate_json(json.dumps(body))
        task = replace(canonical_task("asset-list-recent-in-folder"), expect=ExpectTool("imageman.asset.list"))
        result = run_task(self.backend(self.serve(scripted((200, body)))), task)
        self.assertEqual(result.outcome, Outcome("pass"))
        self.assertEqual((result.reply.tool_calls[0].args, result.reply.tool_calls[0].args_error), ({}, None))

    def test_parallel_calls_and_arguments_that_are_not_an_object(self) -> None:
        search = {"name": "imageman_asset_search", "args": {"query": "x"}}
        self.assertEqual(self.trial((200, gemini_response([search, GET]))).outcome.status, "pass")
        result = self.trial((200, gemini_response([{"name": GET["name"], "args": [1]}])))
        self.assertEqual(
            (result.outcome.code, result.outcome.reason),
            ("tool:bad-args", "imageman.asset.get arguments are not a JSON object: [1]"),
        )


class SchemaTranslation(unittest.TestCase):
    def test_each_schema_becomes_the_subset_gemini_takes(self) -> None:
        asset = {"type": "object", "properties": {"id": {"type": "string"}}, "additionalProperties": False}
        cases = [
            (
                "a local $ref is written out, $defs and additionalProperties dropped",
                {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": {"asset": {"$ref": "#/$defs/Asset", "description": "The asset."}},
                    "$defs": {"Asset": asset},
                },
                {
                    "type": "OBJECT",
                    "properties": {
                        "asset": {
                            "type": "OBJECT",
                            "properties": {"id": {"type": "STRING"}},
                            "description": "The asset.",
                        }
                    },
                },
                [".$schema", ".properties.asset.additionalProperties", ".$defs"],
            ),
            (
                "const is a one-value enum, a type with null is nullable",
                {
                    "type": "object",
                    "properties": {"mode": {"const": "fast"}, "n": {"type": ["integer", "null"], "const": 3}},
                },
                {
                    "type": "OBJECT",
                    "properties": {
                        "mode": {"enum": ["fast"]},
                        "n": {"type": "INTEGER", "nullable": True, "enum": ["3"]},
                    },
                },
                [],
            ),
            (
                "formats Gemini reads are kept, others dropped; oneOf read as anyOf",
                {
                    "type": "object",
                    "properties": {
                        "at": {"type": "string", "format": "date-time"},
                        "site": {"type": "string", "format": "uri", "exclusiveMinimum": 1},
                        "id": {"oneOf": [{"type": "string"}, {"type": "integer", "format": "int64"}]},
                    },
                },
                {
                    "type": "OBJECT",
                    "properties": {
                        "at": {"type": "STRING", "format": "date-time"},
                        "site": {"type": "STRING"},
                        "id": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER", "format": "int64"}]},
                    },
                },
                [".properties.site.exclusiveMinimum", ".properties.site.format"],
            ),
            (
                "the canonical kinds of keyword are kept as they are",
                {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 1}, "minItems": 1, "title": "t"},
                {"type": "ARRAY", "items": {"type": "NUMBER", "minimum": 0, "maximum": 1}, "minItems": 1, "title": "t"},
                [],
            ),
        ]
        for name, schema, translated, dropped in cases:
            with self.subTest(name):
                self.assertEqual(gemini_schema("t", schema), (translated, dropped))
                self.assertEqual(json.dumps(translated).count("$"), 0)

    def test_a_ref_that_leads_back_to_itself_is_refused_naming_the_tool(self) -> None:
        schema = {"type": "object", "properties": {"child": {"$ref": "#"}}}
        with self.assertRaises(ConfigError) as caught:
            gemini_schema("imageman.tree", schema)
        self.assertEqual(
            str(caught.exception),
            "tools: 'imageman.tree': inputSchema.properties.child.$ref '#' leads back to itself; "
            "Gemini takes no recursive schema",
        )


class SchemaNotes(TempDirTestCase):
    def test_validate_lists_what_gemini_is_not_sent_when_it_is_the_backend(self) -> None:
        data = canonical_task_data()
        data["tools"][1]["inputSchema"].update({"$schema": "https://json-schema.org/draft/2020-12/schema"})
        data["tools"][1]["inputSchema"]["properties"]["assetId"]["format"] = "uuid"
        tasks = self.write_json("t.json", data)
        notes = [
            "gemini: imageman.asset.get: inputSchema.properties.assetId.format is not sent "
            "(Gemini's function parameters do not take it)",
            "gemini: imageman.asset.get: inputSchema.$schema is not sent (Gemini's function parameters do not take it)",
        ]
        stdout, stderr, code = run_cli("validate", "--tasks", tasks, env=clean_env(EVAL_BACKEND="gemini"))
        self.assertEqual((stderr, code), ("", 0))
        self.assertEqual([line for line in stdout.splitlines() if line.startswith("gemini: ")], notes)
        stdout, _, _ = run_cli("validate", "--tasks", tasks, env=clean_env())
        self.assertNotIn("gemini", stdout)
        data["tools"][1]["inputSchema"]["properties"]["assetId"] = {"$ref": "#"}
        tasks = self.write_json("t.json", data)
        _, stderr, code = run_cli("validate", "--tasks", tasks, env=clean_env(EVAL_BACKEND="gemini"))
        self.assertEqual(
            (stderr, code),
            (
                "eval_agent validate: error: tools: 'imageman.asset.get': inputSchema.properties.assetId.$ref '#' "
                "leads back to itself; Gemini takes no recursive schema\n",
                2,
            ),
        )

    def test_a_recursive_schema_is_refused_before_anything_is_sent(self) -> None:
        data = canonical_task_data()
        data["tools"][0]["inputSchema"]["properties"]["near"] = {"$ref": "#"}
        fake = self.serve(fake_gemini)
        stdout, stderr, code = run_cli("--tasks", self.write_json("t.json", data), env=gemini_env(fake), cwd=self.tmp)
        self.assertEqual((stdout, code, fake.received), ("", 2, []))
        self.assertEqual(
            stderr,
            "eval_agent: error: tools: 'imageman.asset.search': inputSchema.properties.near.$ref '#' leads back to "
            "itself; Gemini takes no recursive schema\n",
        )


class Conversations(TempDirTestCase):
    def setUp(self) -> None:
        super().setUp()
        data = canonical_task_data()
        data["tasks"] = TASKS
        self.tasks = {task.id: task for task in load_task_file(self.write_json("tasks.json", data), {}).tasks}

    def converse(self, policy: Any, task_id: str, ids: bool = True) -> tuple[Result, list[Received], list[str]]:
        invalid: list[str] = []
        fake = self.serve(conversation_fake(policy, invalid, ids=ids))
        backend = backend_for({"EVAL_BACKEND": "gemini", "GOOGLE_GEMINI_BASE_URL": fake.url(""), "EVAL_MODEL": "m"})
        self.addCleanup(backend.transport.close)
        return run_task(backend, self.tasks[task_id]), fake.received, invalid

    def test_each_call_goes_back_with_its_thought_signature_and_its_result(self) -> None:
        for ids in (True, False):
            with self.subTest(ids=ids):
                result, received, invalid = self.converse(search_then_tag, "tag-from-search", ids)
                self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 3))
                self.assertEqual(result.reply.text, "Tagged ast_1, ast_2.")
                self.assertEqual(result.reply.usage, (450, 105))
                model, answers = received[1].json["contents"][1:3]
                self.assertEqual(model["parts"][0]["thoughtSignature"], signature("1-imageman_asset_search"))
                response = {"name": "imageman_asset_search", "response": {"assets": [{"id": "ast_1"}, {"id": "ast_2"}]}}
                self.assertEqual(
                    answers,
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {**response, **({"id": "fc_1_0"} if ids else {})}}],
                    },
                )

    def test_parallel_calls_are_answered_in_call_order(self) -> None:
        result, received, invalid = self.converse(two_at_once, "compare-two")
        self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 2))
        answers = [part["functionResponse"]["id"] for part in received[1].json["contents"][2]["parts"]]
        self.assertEqual(answers, ["fc_1_0", "fc_1_1"])

    def test_follow_up_turns_carry_the_conversation_so_far(self) -> None:
        result, received, invalid = self.converse(asks_first, "banner")
        self.assertEqual((result.outcome, invalid, len(received)), (Outcome("pass"), [], 3))
        self.assertEqual(
            received[1].json["contents"],
            [
                {"role": "user", "parts": [{"text": "Make us a banner."}]},
                {"role": "model", "parts": [{"text": "What should the banner show, and in which shape?"}]},
                {"role": "user", "parts": [{"text": "A lighthouse at dawn."}]},
            ],
        )

    def test_the_fake_refuses_a_lost_signature_or_an_unanswered_call(self) -> None:
        content = gemini_response([GET])["candidates"][0]["content"]
        sent = {turn_key(content): content}
        user = {"role": "user", "parts": [{"text": "a"}]}
        answer = {
            "role": "user",
            "parts": [{"functionResponse": {"name": GET["name"], "response": {}, "id": "fc_1_0"}}],
        }
        unsigned = {"role": "model", "parts": [{"functionCall": content["parts"][0]["functionCall"]}]}
        gemini_events([user, content, answer], sent)
        for contents in ([user, unsigned, answer], [user, content, user], [user, content]):
            with self.subTest(contents), self.assertRaises(Unlinked):
                gemini_events(contents, sent)
        with self.assertRaises(ValueError):
            check_gemini_request(
                {
                    "contents": [user],
                    "tools": [
                        {
                            "functionDeclarations": [
                                {"name": "f", "parameters": {"type": "OBJECT", "additionalProperties": False}}
                            ]
                        }
                    ],
                }
            )
        with self.assertRaises(ValueError):
            check_gemini_request({"contents": [{**user, "name": "x"}]})


class FakeIsFaithful(TempDirTestCase):
    """The google-genai SDK parses the fake's replies and errors: they are the shapes Gemini sends."""

    def test_the_sdk_reads_the_fake_replies(self) -> None:
        from google import genai
        from google.genai import errors, types

        calls = canned_calls(canonical_task_data()["tasks"][0]["prompt"])
        replies = [
            gemini_response([*calls, GET], "Let me look.", thought="Search first."),
            gemini_response([], finish_reason="SAFETY"),
            {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 9}},
        ]
        for reply in replies:
            types.GenerateContentResponse.model_validate_json(json.dumps(reply))
        fake = self.serve(
            scripted(
                *[(200, reply) for reply in replies],
                gemini_error(400, "INVALID_ARGUMENT", "API key not valid.", "API_KEY_INVALID"),
            )
        )
        client = genai.Client(api_key=KEY, http_options={"base_url": fake.url(""), "api_version": "v1beta"})
        parsed = [client.models.generate_content(model="gemini-3-pro", contents="hi") for _ in replies]
        self.assertEqual(
            [call.name for call in parsed[0].function_calls or []], ["imageman_asset_search", "imageman_asset_get"]
        )
        self.assertEqual(parsed[0].candidates[0].content.parts[2].thought_signature, b"sig:1-imageman_asset_search")
        self.assertEqual(parsed[0].usage_metadata.thoughts_token_count, USAGE["thoughtsTokenCount"])
        self.assertEqual(parsed[1].candidates[0].finish_reason, types.FinishReason.SAFETY)
        self.assertEqual(parsed[2].prompt_feedback.block_reason, types.BlockedReason.PROHIBITED_CONTENT)
        with self.assertRaises(errors.ClientError) as caught:
            client.models.generate_content(model="gemini-3-pro", contents="hi")
        self.assertEqual((caught.exception.code, caught.exception.status), (400, "INVALID_ARGUMENT"))
        self.assertEqual(fake.received[0].path, "/v1beta/models/gemini-3-pro:generateContent")
        self.assertEqual(fake.received[0].headers["x-goog-api-key"], KEY)

    def test_the_sdk_sends_what_the_fake_takes(self) -> None:
        from google import genai
        from google.genai import types

        fake = self.serve(fake_gemini)
        client = genai.Client(api_key=KEY, http_options={"base_url": fake.url(""), "api_version": "v1beta"})
        tool = types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="f", parameters=types.Schema(type="OBJECT", properties={"a": types.Schema(type="STRING")})
                )
            ]
        )
        reply = client.models.generate_content(
            model="gemini-3-pro",
            contents="hi",
            config=types.GenerateContentConfig(tools=[tool], system_instruction="Be brief.", max_output_tokens=10),
        )
        self.assertEqual(reply.text, "I can't share that.")
        check_gemini_request(fake.received[0].json)


if __name__ == "__main__":
    unittest.main()
