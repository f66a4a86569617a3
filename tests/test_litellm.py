"""The canonical tasks, conversations included, through a real LiteLLM proxy on loopback in front of the provider fakes:
OpenAI-shaped and Anthropic-shaped clients, each model behind it in its own provider's shape, as teams swap providers
behind a gateway."""

from __future__ import annotations

import json
import tempfile
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.litellm_proxy import MASTER_KEY, LiteLLMProxy, canned_policy, require_litellm
from tests.providers import anthropic_message, conversation_fake
from tests.support import SHIPPED_TASKS, LoopbackAgent, Received, TempDirTestCase, clean_env, run_cli, send_json

REFUSAL = "I can't help make a fake news photo."
with open(SHIPPED_TASKS, encoding="utf-8") as _f:
    TASKS = json.load(_f)["tasks"]
SAFETY_PROMPT = next(task["prompt"] for task in TASKS if task["id"] == "safety-fake-news-photo")


def refuses(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """Claude declining, as its API states it: stop_reason "refusal", with the text it said."""
    send_json(handler, anthropic_message([], REFUSAL, stop_reason="refusal"))


class ThroughLiteLLM(TempDirTestCase):
    """One proxy for the class; each wiring is one run of the harness's CLI through it."""

    proxy: LiteLLMProxy
    maxDiff = None
    invalid: dict[str, list[str]]

    @classmethod
    def setUpClass(cls) -> None:
        require_litellm()
        folder = tempfile.TemporaryDirectory(prefix="litellm-")
        cls.addClassCleanup(folder.cleanup)
        cls.invalid = {"openai": [], "anthropic": []}  # requests the official SDKs' request types refuse
        upstream = {
            provider: cls.upstream(conversation_fake(provider, canned_policy, cls.invalid[provider]))
            for provider in ("openai", "anthropic")
        }
        models = {
            "gpt-fake": {"model": "openai/gpt-fake", "api_base": upstream["openai"].url("/v1")},
            "claude-fake": {"model": "anthropic/claude-fake", "api_base": upstream["anthropic"].url("")},
            "claude-refuses": {"model": "anthropic/claude-refuses", "api_base": cls.upstream(refuses).url("")},
        }
        for params in models.values():
            params["api_key"] = "upstream-key"
        cls.proxy = LiteLLMProxy(models, folder.name)
        cls.addClassCleanup(cls.proxy.stop)
        cls.proxy.start()

    def setUp(self) -> None:
        super().setUp()
        for refused in self.invalid.values():
            refused.clear()

    @classmethod
    def upstream(cls, respond: Any) -> LoopbackAgent:
        agent = LoopbackAgent(respond).__enter__()
        cls.addClassCleanup(agent.__exit__)
        return agent

    def proxy_said(self) -> str:
        """The proxy's output, for the message of a failed assertion."""
        return f"the LiteLLM proxy's output:\n{self.proxy.output()[-6000:]}"

    def run_through_the_proxy(self, backend: str, model: str, **settings: str) -> tuple[str, str, int]:
        """The harness's CLI on the shipped tasks through the proxy, with its master key as the API key."""
        base, key = (
            ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")
            if backend == "anthropic"
            else ("OPENAI_BASE_URL", "OPENAI_API_KEY")
        )
        wiring = {
            "EVAL_BACKEND": backend,
            "EVAL_MODEL": model,
            "EVAL_TASKS": SHIPPED_TASKS,
            "EVAL_CANARY": "canary-5b0c1d",
            "EVAL_CONCURRENCY": "8",
            base: self.proxy.url("" if backend == "anthropic" else "/v1"),
            key: MASTER_KEY,
        }
        return run_cli(env=clean_env(**{**wiring, **settings}), cwd=self.tmp)

    def assert_every_task_passes(self, backend: str, model: str) -> None:
        stdout, stderr, code = self.run_through_the_proxy(backend, model)
        results = self.read_json("eval-results.json")
        self.assertEqual(
            (stderr, code, {r["id"]: (r["status"], r["code"]) for r in results["results"]}),
            ("", 0, {task["id"]: ("pass", None) for task in TASKS}),
            f"{stdout}\n{self.proxy_said()}",
        )
        self.assertIn("15/15 PASS", stdout)
        trials = {r["id"]: r["trialResults"][0] for r in results["results"]}
        self.assertEqual(
            [
                (trials[t]["turns"], trials[t]["steps"], trials[t]["text"])
                for t in ("asset-tag-from-search", "ai-image-generate-asks-first")
            ],
            [
                (1, 3, "Tagged the 3 photos from the Q3 launch shoot as approved."),
                (
                    2,
                    3,
                    "Happy to. What is it for, what should it show, and which shape: square, or widescreen 16:9?\n"
                    "Here is your banner: ast_gen7b1, 16:9.",
                ),
            ],
        )
        self.assertEqual(self.proxy.egress.request_lines, [], "LiteLLM tried to reach past loopback")

    def assert_the_providers_accepted_every_request(self) -> None:
        self.assertEqual(self.invalid, {"openai": [], "anthropic": []}, "LiteLLM sent a request the SDKs refuse")

    def test_openai_clients_reach_an_openai_model(self) -> None:
        self.assert_every_task_passes("openai", "gpt-fake")
        self.assert_the_providers_accepted_every_request()

    def test_openai_clients_reach_a_claude_model_the_gateway_translates_for(self) -> None:
        # No temperature is sent unasked: the gateway would pass it on, and the Messages API's newest models refuse it.
        self.assert_every_task_passes("openai", "claude-fake")
        self.assert_the_providers_accepted_every_request()

    def test_anthropic_clients_reach_a_claude_model_through_the_gateways_messages_endpoint(self) -> None:
        self.assert_every_task_passes("anthropic", "claude-fake")
        self.assert_the_providers_accepted_every_request()

    def test_anthropic_clients_reach_an_openai_model_the_gateway_translates_for(self) -> None:
        self.assert_every_task_passes("anthropic", "gpt-fake")
        self.assert_the_providers_accepted_every_request()

    # LiteLLM serves /v1/responses for an anthropic/ model by translating to Messages; an openai/ model's it sends on
    # to the upstream's own /v1/responses, which the chat completions fake does not serve.
    def test_responses_clients_reach_a_claude_model_through_the_gateways_responses_endpoint(self) -> None:
        self.assert_every_task_passes("openai-responses", "claude-fake")
        self.assert_the_providers_accepted_every_request()

    def test_the_gateway_turns_a_claude_refusal_into_content_filter_keeping_its_text(self) -> None:
        status, body = self.proxy.post(
            "/v1/chat/completions",
            {"model": "claude-refuses", "messages": [{"role": "user", "content": SAFETY_PROMPT}]},
        )
        choice = body["choices"][0]
        self.assertEqual(
            (status, choice["finish_reason"], choice["message"]["content"], choice["message"].get("tool_calls")),
            (200, "content_filter", REFUSAL, None),
            self.proxy_said(),
        )

    def test_a_claude_refusal_through_the_gateway_is_scored_as_the_providers_refusal(self) -> None:
        stdout, stderr, code = self.run_through_the_proxy(
            "openai", "claude-refuses", EVAL_TASK_GLOB="safety-fake-news-photo"
        )
        result = self.read_json("eval-results.json")["results"][0]
        self.assertEqual((stderr, code, result["status"]), ("", 0, "pass"), f"{stdout}\n{self.proxy_said()}")
        self.assertEqual(
            {key: result["trialResults"][0].get(key) for key in ("refused", "refusedBy", "refusalReason", "text")},
            {"refused": True, "refusedBy": "provider", "refusalReason": "content_filter", "text": REFUSAL},
        )

    def test_a_key_the_gateway_does_not_know_is_answered_400_no_connected_db(self) -> None:
        # With a master key and no database, LiteLLM looks any other key up as a virtual key, on every endpoint.
        for path in ("/v1/chat/completions", "/v1/messages"):
            with self.subTest(path):
                status, body = self.proxy.post(
                    path,
                    {"model": "claude-fake", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
                    key="sk-not-the-master-key",
                )
                self.assertEqual(
                    (status, body["error"]["message"], body["error"]["type"]),
                    (400, "No connected db.", "no_db_connection"),
                    self.proxy_said(),
                )

    def test_a_key_the_gateway_does_not_know_stops_the_run(self) -> None:
        _, stderr, code = self.run_through_the_proxy(
            "openai", "gpt-fake", OPENAI_API_KEY="sk-not-the-master-key", EVAL_CONCURRENCY="1"
        )
        self.assertEqual(code, 3, self.proxy_said())
        self.assertIn("OPENAI_API_KEY", stderr)
        results = self.read_json("eval-results.json")
        self.assertEqual((len(results["results"]), len(results["notRun"])), (1, 14), "it stops after the first")
