"""Properties over any input: a task file, an agent's reply or a provider's is read or refused, never a crash.

Each parser is given generated JSON (and bytes), near-valid shapes mutated at random: what comes back is a TaskFile or a
ConfigError, a Reply or a BackendError, never another exception.
"""

from __future__ import annotations

import json
import unittest
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends.contract import parse_reply
from harness.records import BackendError, ConfigError, Reply, TaskFile
from harness.taskfile import parse_task_file
from tests.support import SHIPPED_TASKS, backend_for, canonical_task_data

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


class ProviderReplies(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.openai = backend_for({"EVAL_BACKEND": "openai", "EVAL_MODEL": "m"})
        cls.anthropic = backend_for({"EVAL_BACKEND": "anthropic", "EVAL_MODEL": "m"})

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


if __name__ == "__main__":
    unittest.main()
