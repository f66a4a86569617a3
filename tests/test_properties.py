"""Properties over any input: a task file, an agent's reply or a provider's is read or refused, never a crash.

Each parser is given generated JSON (and bytes), near-valid shapes mutated at random: what comes back is a TaskFile or a
ConfigError, a Reply or a BackendError, never another exception.
"""

from __future__ import annotations

import json
import os
import sys
import unittest
from collections import deque
from http.server import BaseHTTPRequestHandler
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.contract import parse_reply
from harness.records import Backend, BackendError, ConfigError, Reply, Result, Task, TaskFile
from harness.results import render_json, task_entry, write_atomic
from harness.running import run_task
from harness.taskfile import parse_task_file
from tests.gemini_fake import gemini_response
from tests.providers import anthropic_message, openai_completion
from tests.responses_fake import response
from tests.support import (
    DATA,
    SHIPPED_TASKS,
    LoopbackAgent,
    Received,
    TempDirTestCase,
    backend_for,
    canonical_task_data,
    send_json,
)

ENOUGH = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MORE = settings(ENOUGH, max_examples=400)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
TASK_KEYS = [
    "version",
    "tools",
    "tasks",
    "system",
    "id",
    "category",
    "prompt",
    "expect",
    "blocking",
    "tool",
    "requiredArgs",
]
TASK_KEYS += [
    "argValues",
    "forbiddenTools",
    "forbiddenText",
    "trajectory",
    "order",
    "refusal",
    "anyOf",
    "ignoreCase",
    "name",
]
TASK_KEYS += ["inputSchema", "properties", "required", "type", "description"]
TASK_KEYS += ["turns", "toolResults", "maxSteps", "comment", "sequence", "echo", "turn"]


def or_junk(shape: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The shape, or, as often, a value of another type where it should be."""
    return st.one_of(
        shape, scalars, st.lists(scalars, max_size=2), st.dictionaries(st.text(max_size=5), scalars, max_size=2)
    )


def some(**keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An object with some of these keys, each value the shape or junk."""
    return st.fixed_dictionaries({}, optional={key: or_junk(value) for key, value in keys.items()})


def mutated(document: Any, data: st.DataObject) -> Any:
    """The document with one value somewhere in it replaced by a generated one, or a key added or dropped."""
    path: list[Any] = []
    node = document
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        node = node[key]
    if not path:
        return data.draw(json_values)
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    action = data.draw(st.sampled_from(["replace", "drop", "add"]))
    if action == "drop" and isinstance(parent, dict):
        del parent[path[-1]]
    elif action == "add" and isinstance(parent, dict):
        parent[data.draw(st.sampled_from(TASK_KEYS))] = data.draw(json_values)
    else:
        parent[path[-1]] = data.draw(json_values)
    return document


def load(raw: bytes) -> TaskFile | None:
    """A task file from bytes, or None for a ConfigError; any other exception fails the test."""
    try:
        task_file, _ = parse_task_file(raw, "t.json", {"SET": "x"})
    except ConfigError:
        return None
    return task_file


class TaskFiles(unittest.TestCase):
    @ENOUGH
    @given(st.binary(max_size=200))
    def test_any_bytes(self, raw: bytes) -> None:
        load(raw)

    @ENOUGH
    @given(json_values)
    def test_any_json(self, value: Any) -> None:
        load(json.dumps(value).encode())

    @ENOUGH
    @given(st.data())
    def test_the_canonical_file_changed_anywhere(self, data: st.DataObject) -> None:
        document = mutated(canonical_task_data(), data)
        task_file = load(json.dumps(document).encode())
        if task_file is not None:
            self.assertTrue(task_file.tasks)

    @MORE
    @given(st.data())
    def test_the_shipped_conversations_changed_anywhere(self, data: st.DataObject) -> None:
        with open(SHIPPED_TASKS, encoding="utf-8") as f:
            document = json.load(f)
        document["tasks"] = [task for task in document["tasks"] if "turns" in task or "toolResults" in task]
        task_file = load(json.dumps(mutated(document, data)).encode())
        if task_file is not None:
            self.assertTrue(task_file.tasks)

    @ENOUGH
    @given(st.text(alphabet="${}$ABC_9 x", max_size=12))
    def test_any_placeholder_text(self, text: str) -> None:
        document = canonical_task_data()
        document["tasks"][0]["prompt"] = f"Find {text}"
        load(json.dumps(document).encode())


REPLY_KEYS = ["toolCall", "toolCalls", "refused", "text", "name", "args"]


def near_replies() -> st.SearchStrategy[Any]:
    """Replies in the contract's shape, with values of any type where the contract wants one."""
    call = some(name=st.text(max_size=8), args=json_values | st.text(max_size=12))
    return some(
        toolCall=st.none() | call, toolCalls=st.lists(or_junk(call), max_size=3), refused=st.booleans(), text=st.text()
    )


class Replies(unittest.TestCase):
    @ENOUGH
    @given(json_values | near_replies())
    def test_any_reply_body_is_a_reply_or_an_error_reply(self, body: Any) -> None:
        try:
            self.assertIsInstance(parse_reply(body), Reply)
        except BackendError:
            pass


def completions() -> st.SearchStrategy[Any]:
    """Chat completions near the real shape, any part of them of any type."""
    function = some(name=st.just("imageman_asset_get") | st.text(max_size=8), arguments=st.text(max_size=20))
    call = some(id=st.text(max_size=6), type=st.just("function"), function=function)
    message = some(
        content=st.text(max_size=10), refusal=st.text(max_size=10), tool_calls=st.lists(or_junk(call), max_size=3)
    )
    choice = some(message=message, finish_reason=st.sampled_from(["length", "content_filter", "stop", "tool_calls"]))
    return some(
        choices=st.lists(or_junk(choice), max_size=2),
        usage=some(prompt_tokens=st.integers(), completion_tokens=st.integers()),
    )


def messages() -> st.SearchStrategy[Any]:
    """Anthropic messages near the real shape, any part of them of any type."""
    block = some(
        type=st.sampled_from(["text", "tool_use", "thinking"]),
        text=st.text(max_size=10),
        name=st.just("imageman_asset_get") | st.text(max_size=8),
        input=json_values,
        id=st.text(max_size=6),
        thinking=st.text(max_size=6),
        signature=st.text(max_size=6),
    )
    return some(
        content=st.lists(or_junk(block), max_size=3),
        stop_reason=st.sampled_from(["max_tokens", "refusal", "end_turn", "tool_use"]),
        usage=some(input_tokens=st.integers(), output_tokens=st.integers()),
    )


def responses() -> st.SearchStrategy[Any]:
    """Responses API responses near the real shape, any part of them of any type."""
    part = some(
        type=st.sampled_from(["output_text", "refusal"]), text=st.text(max_size=10), refusal=st.text(max_size=10)
    )
    item = some(
        type=st.sampled_from(["message", "function_call", "reasoning", "custom_tool_call"]),
        content=st.lists(or_junk(part), max_size=2),
        name=st.just("imageman_asset_get") | st.text(max_size=8),
        arguments=st.text(max_size=20),
        call_id=st.text(max_size=6),
        encrypted_content=st.text(max_size=6),
    )
    return some(
        output=st.lists(or_junk(item), max_size=3),
        status=st.sampled_from(["completed", "incomplete", "failed"]),
        incomplete_details=some(reason=st.sampled_from(["max_output_tokens", "content_filter"])),
        error=some(code=st.text(max_size=6), message=st.text(max_size=10)),
        usage=some(input_tokens=st.integers(), output_tokens=st.integers()),
    )


def generate_content() -> st.SearchStrategy[Any]:
    """Gemini generateContent responses near the real shape, any part of them of any type."""
    call = some(name=st.just("imageman_asset_get") | st.text(max_size=8), args=json_values, id=st.text(max_size=6))
    part = some(
        text=st.text(max_size=10), thought=st.booleans(), thoughtSignature=st.text(max_size=6), functionCall=call
    )
    candidate = some(
        content=some(role=st.just("model"), parts=st.lists(or_junk(part), max_size=3)),
        finishReason=st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "MALFORMED_FUNCTION_CALL"]),
        finishMessage=st.text(max_size=10),
    )
    return some(
        candidates=st.lists(or_junk(candidate), max_size=2),
        promptFeedback=some(blockReason=st.sampled_from(["SAFETY", "PROHIBITED_CONTENT"])),
        usageMetadata=some(
            promptTokenCount=st.integers(), candidatesTokenCount=st.integers(), thoughtsTokenCount=st.integers()
        ),
    )


class ProviderReplies(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.openai = backend_for({"EVAL_BACKEND": "openai", "EVAL_MODEL": "m"})
        cls.anthropic = backend_for({"EVAL_BACKEND": "anthropic", "EVAL_MODEL": "m"})
        cls.responses = backend_for({"EVAL_BACKEND": "openai-responses", "EVAL_MODEL": "m"})
        cls.gemini = backend_for({"EVAL_BACKEND": "gemini", "EVAL_MODEL": "m"})

    def read(self, backend: Any, body: Any) -> None:
        try:
            self.assertIsInstance(backend.reply(body, 1), Reply)
        except BackendError:
            pass

    @MORE
    @given(completions())
    def test_any_chat_completion(self, body: Any) -> None:
        self.read(self.openai, body)

    @MORE
    @given(messages())
    def test_any_message(self, body: Any) -> None:
        self.read(self.anthropic, body)

    @MORE
    @given(responses())
    def test_any_response(self, body: Any) -> None:
        self.read(self.responses, body)

    @MORE
    @given(generate_content())
    def test_any_generate_content(self, body: Any) -> None:
        self.read(self.gemini, body)


# Any string an agent can send: JSON carries lone surrogates (\\udXXX escapes), which st.text() never draws.
agent_strings = st.lists(st.characters(exclude_categories=()) | st.characters(categories=["Cs"]), max_size=10).map(
    lambda chars: json.loads(json.dumps("".join(chars)))  # as JSON reads it: "\\ud83d\\ude00" is one character
)
SEARCH = "imageman.asset.search"
# Two turns, and the search's result echoes its query: on every backend, what the agent said goes back to it.
TALK = {
    "id": "talk",
    "category": "asset.search",
    "prompt": "Find the launch photos.",
    "turns": ["And the others?"],
    "toolResults": {SEARCH: {"found": {"echo": "query"}}},
    "expect": {"tool": SEARCH},
}
A_FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class AgentStrings(TempDirTestCase):
    """Any string an agent sends, lone surrogates and controls included, goes through a conversation on every backend:
    back to the agent as it came, in requests that are UTF-8 JSON, and into a results file that is UTF-8 JSON."""

    replies: deque[Any]
    agent: LoopbackAgent
    task: Task

    @classmethod
    def setUpClass(cls) -> None:
        cls.replies = deque()

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, cls.replies.popleft())

        cls.agent = LoopbackAgent(respond).__enter__()
        cls.addClassCleanup(cls.agent.__exit__)
        data = canonical_task_data()
        data["tasks"] = [TALK]
        cls.task = parse_task_file(json.dumps(data).encode(), "talk.json", {})[0].tasks[0]

    def converse(self, backend: Backend, replies: list[Any]) -> list[Any]:
        """The task sent to a backend whose agent answers with `replies`: each request it received, read as strict
        UTF-8 JSON (json.loads lets a lone surrogate through in bytes), and the trial read back from a results file."""
        self.replies.clear()
        self.replies.extend(replies)
        before = len(self.agent.received)
        self.recorded(run_task(backend, self.task))
        return [_strict_json(received.body) for received in self.agent.received[before:]]

    def recorded(self, result: Result) -> None:
        """The trial written as a results file is, and read back: strict UTF-8, each string as the agent sent it."""
        path = os.path.join(self.tmp, "results.json")
        entry = task_entry(self.task, [result])
        write_atomic(path, render_json({"results": [entry]}))
        with open(path, "rb") as f:
            self.assertEqual(_strict_json(f.read()), {"results": [json.loads(json.dumps(entry))]})

    @A_FEW
    @given(agent_strings, agent_strings.filter(bool), agent_strings, agent_strings, agent_strings)
    def test_an_http_agent(self, text: str, name: str, key: str, value: str, last: str) -> None:
        backend = backend_for({"EVAL_AGENT_URL": self.agent.url(), "EVAL_RETRIES": "0"})
        self.addCleanup(backend.transport.close)
        said = {"toolCall": {"name": name, "args": {key: value}}, "text": text}
        _, second = self.converse(backend, [said, {"text": f"ok {last}"}])
        self.assertEqual(
            second["messages"][1],
            {"role": "assistant", "content": text, "toolCalls": [{"name": name, "args": {key: value}}]},
        )

    @settings(A_FEW, max_examples=10)  # two processes an example
    @given(agent_strings, agent_strings.filter(bool), agent_strings, agent_strings, agent_strings)
    def test_a_command_agent(self, text: str, name: str, key: str, value: str, last: str) -> None:
        received, replies = os.path.join(self.tmp, "received"), os.path.join(self.tmp, "replies")
        said = {"toolCall": {"name": name, "args": {key: value}}, "text": text}
        with open(replies, "w", encoding="ascii") as f:
            f.write(f"{json.dumps(said)}\n{json.dumps({'text': f'ok {last}'})}\n")
        if os.path.exists(received):
            os.unlink(received)
        agent = f"{sys.executable} -S {os.path.join(DATA, 'agents', 'script_agent.py')} replay {received} {replies}"
        self.recorded(run_task(backend_for({"EVAL_BACKEND": "command", "EVAL_AGENT_CMD": agent}), self.task))
        with open(received, "rb") as f:
            _, second = map(_strict_json, f.read().splitlines())
        self.assertEqual(
            second["messages"][1],
            {"role": "assistant", "content": text, "toolCalls": [{"name": name, "args": {key: value}}]},
        )

    @A_FEW
    @given(agent_strings, agent_strings, agent_strings, agent_strings)
    def test_an_openai_compatible_model(self, text: str, key: str, value: str, last: str) -> None:
        backend = backend_for({"EVAL_BACKEND": "openai", "OPENAI_BASE_URL": self.agent.url(""), "EVAL_MODEL": "m"})
        self.addCleanup(backend.transport.close)
        args = {"query": value, key: value}
        called = openai_completion([{"name": "imageman_asset_search", "args": args}], text)
        _, result, turn = self.converse(
            backend, [called, openai_completion([], f"ok {last}"), openai_completion([], "ok")]
        )
        assistant, tool = result["messages"][-2:]
        self.assertEqual(assistant["content"], text)
        self.assertEqual(json.loads(assistant["tool_calls"][0]["function"]["arguments"]), args)
        self.assertEqual(json.loads(tool["content"]), {"found": value})
        self.assertEqual(turn["messages"][-2]["content"], f"ok {last}")

    @A_FEW
    @given(agent_strings.filter(bool), agent_strings, agent_strings, agent_strings)
    def test_an_anthropic_model(self, text: str, key: str, value: str, last: str) -> None:
        backend = backend_for(
            {"EVAL_BACKEND": "anthropic", "ANTHROPIC_BASE_URL": self.agent.url(""), "EVAL_MODEL": "m"}
        )
        self.addCleanup(backend.transport.close)
        args = {"query": value, key: value}
        called = anthropic_message([{"name": "imageman_asset_search", "args": args}], text)
        _, result, turn = self.converse(
            backend, [called, anthropic_message([], f"ok {last}"), anthropic_message([], "ok")]
        )
        assistant, results = result["messages"][-2:]
        self.assertEqual(assistant["content"][0], {"type": "text", "text": text})
        self.assertEqual(assistant["content"][1]["input"], args)
        self.assertEqual(json.loads(results["content"][0]["content"]), {"found": value})
        self.assertEqual(turn["messages"][-2]["content"], [{"type": "text", "text": f"ok {last}"}])

    @A_FEW
    @given(agent_strings.filter(bool), agent_strings, agent_strings, agent_strings)
    def test_a_responses_api_model(self, text: str, key: str, value: str, last: str) -> None:
        settings = {"EVAL_BACKEND": "openai-responses", "OPENAI_BASE_URL": self.agent.url(""), "EVAL_MODEL": "m"}
        backend = backend_for(settings)
        self.addCleanup(backend.transport.close)
        args = {"query": value, key: value}
        called = response([{"name": "imageman_asset_search", "args": args}], text)
        _, result, turn = self.converse(backend, [called, response([], f"ok {last}"), response([], "ok")])
        message, call, output = result["input"][-3:]
        self.assertEqual(message["content"][0]["text"], text)
        self.assertEqual(json.loads(call["arguments"]), args)
        self.assertEqual(json.loads(output["output"]), {"found": value})
        self.assertEqual(turn["input"][-2]["content"][0]["text"], f"ok {last}")

    @A_FEW
    @given(agent_strings.filter(bool), agent_strings, agent_strings, agent_strings)
    def test_a_gemini_model(self, text: str, key: str, value: str, last: str) -> None:
        settings = {"EVAL_BACKEND": "gemini", "GOOGLE_GEMINI_BASE_URL": self.agent.url(""), "EVAL_MODEL": "m"}
        backend = backend_for(settings)
        self.addCleanup(backend.transport.close)
        args = {"query": value, key: value}
        called = gemini_response([{"name": "imageman_asset_search", "args": args}], text)
        _, result, turn = self.converse(backend, [called, gemini_response([], f"ok {last}"), gemini_response([], "ok")])
        model, answers = result["contents"][-2:]
        self.assertEqual(model["parts"][0]["text"], text)
        self.assertEqual(model["parts"][1]["functionCall"]["args"], args)
        self.assertEqual(answers["parts"][0]["functionResponse"]["response"], {"found": value})
        self.assertEqual(turn["contents"][-2]["parts"][0]["text"], f"ok {last}")


def _strict_json(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


if __name__ == "__main__":
    unittest.main()
