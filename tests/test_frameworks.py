"""Real agent frameworks as in-app agents, adapted as examples/frameworks/ shows: the OpenAI Agents SDK against a
loopback fake of Chat Completions, and pydantic-ai driven by its FunctionModel, each behind POST /run and run on the
canonical tasks through the CLI. A model that does what each task asks passes; a model that answers with nothing never
does. Both frameworks are test-only packages (requirements-test.txt): without them these tests skip, under CI=true
they fail."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
import unittest
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

from tests.providers import (
    Call,
    Event,
    check_openai_request,
    conversation_fake,
    openai_completion,
    openai_events,
    provider_name,
)
from tests.support import CANNED, ROOT, SHIPPED_TASKS, Received, TempDirTestCase, clean_env, run_cli, send_json
from tests.test_docs import CAREFUL, CARELESS, Turns, playing
from tests.test_served_tools import WORLD_TASKS, verdicts

EXAMPLES = os.path.join(ROOT, "examples", "frameworks")
with open(SHIPPED_TASKS, encoding="utf-8") as _f:
    SHIPPED = json.load(_f)
SAFETY = [task["id"] for task in SHIPPED["tasks"] if task["category"] == "safety"]
PROVIDER_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # the tool names OpenAI's API accepts


@dataclass(frozen=True)
class Answer:
    """What a scripted model says at one step: calls, text, or a refusal (OpenAI's `refusal` field)."""

    calls: tuple[Call, ...] = ()
    text: str | None = None
    refusal: str | None = None


Model = Callable[[list[Event]], Answer]


def well_behaved(events: list[Event]) -> Answer:
    """A model that does what each canonical task asks: the stub's canned reply for the newest user message, step by
    step (in the names the tools are offered under), then a word once its calls are made; it refuses what the stub
    refuses."""
    last_user = max(index for index, event in enumerate(events) if event[0] == "user")
    canned = CANNED[events[last_user][1]]
    steps = canned if isinstance(canned, list) else [canned]
    made = sum(event[0] == "assistant" for event in events[last_user:])
    if made == len(steps):
        return Answer(text="Done.")
    reply = steps[made]
    if reply.get("refused"):
        return Answer(refusal=reply["text"])
    calls = reply.get("toolCalls") or ([reply["toolCall"]] if reply.get("toolCall") else [])
    return Answer(tuple((provider_name(call["name"]), call["args"]) for call in calls), reply.get("text"))


def empty(events: list[Event]) -> Answer:
    """A model that answers every request with an empty message."""
    return Answer(text="")


def require(module: str) -> None:
    """Skip without the framework, but under CI=true fail: make test installs it from requirements-test.txt."""
    if importlib.util.find_spec(module) is None:
        why = f"the framework tests need {module}: make test installs it from requirements-test.txt"
        if os.environ.get("CI") == "true":
            raise AssertionError(f"{why} (under CI=true a missing framework is a failure)")
        raise unittest.SkipTest(why)


def example(name: str) -> ModuleType:
    """An adapter of examples/frameworks/, imported from its file."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Framework(TempDirTestCase):
    """A framework's adapter served on loopback for a test, and the harness's CLI run against it."""

    def serve_adapter(self, server: ThreadingHTTPServer) -> str:
        """Serve the adapter's server until the test ends; its /run URL."""
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return f"http://127.0.0.1:{server.server_port}/run"

    def run_on(self, url: str) -> tuple[str, str, int]:
        """The canonical tasks through the CLI, against the agent at `url`."""
        env = clean_env(
            EVAL_TASKS=SHIPPED_TASKS,
            EVAL_AGENT_URL=url,
            EVAL_CANARY="canary-5e0b",
            EVAL_RESULTS=os.path.join(self.tmp, "eval-results.json"),
        )
        return run_cli(env=env, cwd=self.tmp)

    def assert_never_passes(self, stdout: str, code: int, reason: str) -> None:
        """Every safety task an error for `reason`, and the gate failed on them."""
        self.assertEqual(code, 1, stdout)
        for task_id in SAFETY:
            self.assertRegex(stdout, rf"(?m)^ERROR {task_id} .*  {reason}")
        self.assertIn(f"blocking task failed ({', '.join(SAFETY)})", stdout)


class OpenAIAgentsSDK(Framework):
    """An Agents SDK agent whose OpenAIChatCompletionsModel talks to a loopback fake of Chat Completions."""

    adapter: ModuleType

    @classmethod
    def setUpClass(cls) -> None:
        require("agents")
        from agents import set_tracing_disabled

        set_tracing_disabled(True)  # traces would go to OpenAI's platform
        cls.adapter = example("openai_agents_sdk")

    def agent(self, model: Model) -> str:
        """The adapter on a model played by the fake; its URL. Requests the openai SDK's own types refuse, or that
        offer a tool under a name OpenAI refuses, fail the test."""
        from openai import AsyncOpenAI

        invalid: list[str] = []
        self.addCleanup(lambda: self.assertEqual(invalid, []))

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            body = received.json
            try:
                check_openai_request(body)
            except ValueError as error:
                invalid.append(str(error))
            invalid.extend(
                t["function"]["name"] for t in body["tools"] if not PROVIDER_SAFE.match(t["function"]["name"])
            )
            events = openai_events(body["messages"])
            answer = model(events)
            completion = openai_completion([{"name": name, "args": args} for name, args in answer.calls], answer.text)
            message = completion["choices"][0]["message"]
            step = sum(event[0] == "assistant" for event in events)
            for i, call in enumerate(message.get("tool_calls", [])):
                call["id"] = f"call_{step}_{i}"  # unique in the conversation, as OpenAI's are
            if answer.refusal:
                message["refusal"] = answer.refusal
            send_json(handler, completion)

        fake = self.serve(respond)
        client = AsyncOpenAI(base_url=fake.url("/v1"), api_key="sk-test", max_retries=0)
        adapter = self.adapter.Adapter(client, "gpt-5.5", SHIPPED["tools"])
        self.addCleanup(adapter.close)
        return self.serve_adapter(self.adapter.serve(adapter))

    def test_a_well_behaved_model_passes_the_canonical_tasks(self) -> None:
        stdout, stderr, code = self.run_on(self.agent(well_behaved))
        self.assertEqual((stderr, code), ("", 0), stdout)
        self.assertIn("15/15 PASS at 100%", stdout)

    def test_a_model_that_answers_with_an_empty_message_never_passes(self) -> None:
        stdout, stderr, code = self.run_on(self.agent(empty))
        self.assertEqual(stderr, "")
        self.assert_never_passes(stdout, code, "reply:empty")
        self.assertIn("0/15 PASS", stdout)


class PydanticAI(Framework):
    """A pydantic-ai agent driven by its FunctionModel."""

    adapter: ModuleType

    @classmethod
    def setUpClass(cls) -> None:
        require("pydantic_ai")
        cls.adapter = example("pydantic_ai_agent")

    def agent(self, model: Model) -> str:
        """The adapter on a FunctionModel playing `model`; its URL."""
        from pydantic_ai.messages import (
            ModelMessage,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        def events_of(messages: list[ModelMessage]) -> list[Event]:
            events: list[Event] = []
            for message in messages:
                if isinstance(message, ModelResponse):
                    calls = [(p.tool_name, p.args_as_dict()) for p in message.parts if isinstance(p, ToolCallPart)]
                    events.append(("assistant", message.text, calls))
                    continue
                for part in message.parts:
                    if isinstance(part, UserPromptPart):
                        events.append(("user", part.content))
                    elif isinstance(part, ToolReturnPart):
                        events.append(("result", part.tool_name, part.content))
            return events

        def play(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.assertEqual([t.name for t in info.function_tools if not PROVIDER_SAFE.match(t.name)], [])
            answer = model(events_of(messages))
            text = answer.refusal or answer.text
            calls = [ToolCallPart(name, args) for name, args in answer.calls]
            return ModelResponse(parts=[*([TextPart(text)] if text else []), *calls])

        return self.serve_adapter(self.adapter.serve(self.adapter.Adapter(FunctionModel(play), SHIPPED["tools"])))

    def test_a_well_behaved_model_passes_the_canonical_tasks(self) -> None:
        stdout, stderr, code = self.run_on(self.agent(well_behaved))
        self.assertEqual((stderr, code), ("", 0), stdout)
        self.assertIn("15/15 PASS at 100%", stdout)

    def test_a_model_that_answers_with_nothing_never_passes(self) -> None:
        stdout, stderr, code = self.run_on(self.agent(empty))
        self.assertEqual(stderr, "")
        self.assert_never_passes(stdout, code, r"reply:(http-status|agent-error): .*UnexpectedModelBehavior")
        self.assertIn("0/15 PASS", stdout)


class OpenAIAgentsSDKOverMCP(Framework):
    """An Agents SDK agent whose tools are the ones the harness serves it (MCPServerStreamableHttp on the request's
    toolServer.url), its model a loopback fake of Chat Completions: the tool worlds' tasks get the verdicts the same
    decisions get from a model on the openai backend, where the harness plays the tools itself."""

    adapter: ModuleType

    @classmethod
    def setUpClass(cls) -> None:
        require("agents")
        from agents import set_tracing_disabled

        set_tracing_disabled(True)  # traces would go to OpenAI's platform
        cls.adapter = example("openai_agents_mcp")

    def run_both(self, model: dict[str, Turns]) -> tuple[tuple[dict[str, Any], int], tuple[dict[str, Any], int]]:
        """The tool worlds' tasks run by the agent (http, tools served) and by the model (openai): each one's results
        and exit code. Requests the openai SDK's own types refuse fail the test."""
        from openai import AsyncOpenAI

        invalid: list[str] = []
        self.addCleanup(lambda: self.assertEqual(invalid, []))
        fake = self.serve(conversation_fake("openai", playing(model), invalid))
        client = AsyncOpenAI(base_url=fake.url("/v1"), api_key="sk-test", max_retries=0)
        adapter = self.adapter.Adapter(client, "gpt-5.5")
        self.addCleanup(adapter.close)
        url = self.serve_adapter(self.adapter.serve(adapter))
        runs = []
        for name, env in (
            ("agent", {"EVAL_AGENT_URL": url, "EVAL_TOOL_NAMES": "safe"}),
            ("model", {"EVAL_BACKEND": "openai", "EVAL_MODEL": "m", "OPENAI_API_KEY": "sk-test"}),
        ):
            results = os.path.join(self.tmp, f"{name}.json")
            env = clean_env(EVAL_TASKS=WORLD_TASKS, EVAL_RESULTS=results, OPENAI_BASE_URL=fake.url("/v1"), **env)
            stdout, stderr, code = run_cli(env=env, cwd=self.tmp)
            self.assertEqual(stderr, "", stdout)
            with open(results, encoding="utf-8") as f:
                runs.append((json.load(f), code))
        return runs[0], runs[1]

    def test_a_careful_agent_passes_the_tool_worlds_as_the_model_does(self) -> None:
        (agent, code), (model, model_code) = self.run_both(CAREFUL)
        self.assertEqual((verdicts(agent), code), (verdicts(model), model_code))
        self.assertEqual((agent["passed"], code), (3, 0))
        sources = [
            r["source"] for r in agent["results"][1]["trialResults"][0]["conversation"][0]["steps"][0]["results"]
        ]
        self.assertEqual(sources, ["case", "environment"], "the calls judged are the ones the harness answered")

    def test_a_careless_agent_fails_them_as_the_model_does_a_wrong_address_on_the_state(self) -> None:
        (agent, code), (model, model_code) = self.run_both(CARELESS)
        self.assertEqual((verdicts(agent), code), (verdicts(model), model_code))
        self.assertEqual((agent["passed"], code), (0, 1))
        self.assertEqual(verdicts(agent)["share-with-ana"][:2], ("fail", "state:mismatch"))


if __name__ == "__main__":
    unittest.main()
