"""Loopback fakes of the OpenAI Chat Completions and Anthropic Messages APIs, answering in their documented shapes."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support import CANNED, Received, Respond, send_json


def provider_name(name: str) -> str:
    """How the harness maps a task-file tool name for a provider."""
    return name.replace(".", "_")


def canned_calls(prompt: str) -> list[dict[str, Any]]:
    """The stub's canned calls for a canonical prompt, in provider names: [{"name", "args"}]."""
    reply = CANNED.get(prompt, {})
    calls = reply.get("toolCalls") or ([reply["toolCall"]] if reply.get("toolCall") else [])
    return [{"name": provider_name(call["name"]), "args": call["args"]} for call in calls]


def openai_completion(
    calls: list[dict[str, Any]], text: str | None = None, arguments: list[str] | None = None, finish_reason: str = ""
) -> dict[str, Any]:
    """A chat.completion object; `arguments` overrides the JSON-encoded arguments (to send malformed ones)."""
    tool_calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": arguments[i] if arguments else json.dumps(call["args"])},
        }
        for i, call in enumerate(calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764480000,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }


def anthropic_message(calls: list[dict[str, Any]], text: str | None = None, stop_reason: str = "") -> dict[str, Any]:
    """A Message object with an optional text block before the tool_use blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": call["name"], "input": call["args"]}
        for i, call in enumerate(calls)
    ]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": 200, "output_tokens": 40},
    }


def openai_error(status: int, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def anthropic_error(status: int, kind: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"type": "error", "error": {"type": kind, "message": message}}


def user_prompt(received: Received) -> str:
    messages = received.json["messages"]
    return next(m["content"] for m in messages if m["role"] == "user")


def fake_openai(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A model that calls what the stub would, with a sentence of text when it calls nothing."""
    calls = canned_calls(user_prompt(received))
    send_json(handler, openai_completion(calls, None if calls else "I can't share that."))


def fake_anthropic(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A model that says a few words, then calls what the stub would."""
    calls = canned_calls(user_prompt(received))
    send_json(handler, anthropic_message(calls, "Let me do that." if calls else "I can't share that."))


# Conversations: fakes that play a model out over several requests, and refuse any request whose tool results do not
# answer the calls of the message before them, as the providers do.

Call = tuple[str, dict[str, Any]]  # (provider name, arguments)
# What a fake model has seen, provider-neutral: ("user", text), ("assistant", text, calls), ("result", name, content).
Event = tuple[Any, ...]
Policy = Callable[[list[Event]], tuple[list[Call], str | None]]


class Unlinked(Exception):
    """A request whose tool results do not answer the calls they should: a provider answers it with 400."""


def openai_events(messages: list[dict[str, Any]]) -> list[Event]:
    """The conversation of a Chat Completions request; Unlinked unless every call of an assistant message is answered
    by one `tool` message, right after it, naming its tool_call_id, and no tool message answers anything else."""
    events: list[Event] = []
    waiting: dict[str, str] = {}  # tool_call_id -> name, of the last assistant message
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if message["tool_call_id"] not in waiting:
                raise Unlinked(f"messages[{index}]: tool_call_id {message['tool_call_id']!r} answers no open call")
            events.append(("result", waiting.pop(message["tool_call_id"]), message["content"]))
            continue
        if waiting:
            raise Unlinked(
                f"messages[{index}]: the calls {sorted(waiting)} of the assistant message got no tool message"
            )
        if role == "assistant":
            calls = message.get("tool_calls") or []
            waiting = {call["id"]: call["function"]["name"] for call in calls}
            if len(waiting) != len(calls):
                raise Unlinked(f"messages[{index}]: tool call ids repeat")
            named = [(call["function"]["name"], json.loads(call["function"]["arguments"])) for call in calls]
            events.append(("assistant", message.get("content"), named))
        elif role == "user":
            events.append(("user", message["content"]))
    if waiting:
        raise Unlinked(f"the calls {sorted(waiting)} of the last assistant message got no tool message")
    return events


def anthropic_events(messages: list[dict[str, Any]]) -> list[Event]:
    """The conversation of a Messages request; Unlinked unless roles alternate from a user message, and the message
    after one with tool_use blocks answers every one of them, tool_result blocks first, and nothing else."""
    events: list[Event] = []
    waiting: dict[str, str] = {}  # tool_use id -> name, of the last assistant message
    for index, message in enumerate(messages):
        if message["role"] != ("user" if index % 2 == 0 else "assistant"):
            raise Unlinked(f"messages[{index}]: roles must alternate, starting with user")
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "assistant":
            uses = [block for block in blocks if block["type"] == "tool_use"]
            waiting = {block["id"]: block["name"] for block in uses}
            text = "".join(block["text"] for block in blocks if block["type"] == "text") or None
            events.append(("assistant", text, [(block["name"], block["input"]) for block in uses]))
            continue
        results = [block for block in blocks if block["type"] == "tool_result"]
        if blocks[: len(results)] != results:
            raise Unlinked(f"messages[{index}]: tool_result blocks must come first")
        if {block["tool_use_id"] for block in results} != set(waiting) or len(results) != len(waiting):
            raise Unlinked(f"messages[{index}]: tool_result ids do not answer the tool_use ids {sorted(waiting)}")
        events += [("result", waiting[block["tool_use_id"]], block["content"]) for block in results]
        events += [("user", block["text"]) for block in blocks[len(results) :]]
        waiting = {}
    return events


@dataclass(frozen=True)
class Planted:
    """What a provider adds to its replies and requires back (Gemini's thought signatures), the SDKs may not know."""

    sign: Callable[[dict[str, Any]], None]  # adds it to a reply
    missing: Callable[[dict[str, Any]], str | None]  # the provider's 400 message for a request without it, or None
    fields: tuple[str, ...] = ()  # its keys the SDKs' request types do not know, let through their checks


def conversation_fake(provider: str, policy: Policy, invalid: list[str], planted: Planted | None = None) -> Respond:
    """A provider's fake model playing `policy` out; a request the SDK's own request types refuse is noted in
    `invalid`, one whose ids do not link up, or that lacks what was planted, is answered 400 as the provider would."""
    check, events_of = {
        "openai": (check_openai_request, openai_events),
        "anthropic": (check_anthropic_request, anthropic_events),
    }[provider]

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        body = received.json
        try:
            check(body, planted.fields if planted else ())
        except ValueError as exc:
            invalid.append(str(exc))
        try:
            events = events_of(body["messages"])
            missing = planted.missing(body) if planted else None
            if missing:
                raise Unlinked(missing)
        except Unlinked as exc:
            error = (
                openai_error(400, str(exc))
                if provider == "openai"
                else anthropic_error(400, "invalid_request_error", str(exc))
            )
            send_json(handler, error[1], error[0])
            return
        named, text = policy(events)
        calls = [{"name": name, "args": args} for name, args in named]
        step = sum(event[0] == "assistant" for event in events) + 1  # ids unique in the conversation, as real ones are
        if provider == "openai":
            reply = openai_completion(calls, text)
            for i, call in enumerate(reply["choices"][0]["message"].get("tool_calls", [])):
                call["id"] = f"call_{step}_{i}"
        else:
            reply = anthropic_message(calls, text)
            for i, block in enumerate(b for b in reply["content"] if b["type"] == "tool_use"):
                block["id"] = f"toolu_{step}_{i}"
        if planted:
            planted.sign(reply)
        send_json(handler, reply)

    return respond


_STRICT: list[Any] = []


def _strict_adapters() -> tuple[Any, Any]:
    """The SDKs' own request types as validators that refuse unknown keys anywhere (made once per process)."""
    if not _STRICT:
        import sys

        from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
        from pydantic import ConfigDict, TypeAdapter
        from typing_extensions import is_typeddict

        # The SDKs' TypedDicts let unknown keys through; a provider answers them with 400. Validate as it would.
        for name, module in list(sys.modules.items()):
            if name.startswith(("openai.types", "anthropic.types")):
                for value in vars(module).values():
                    if isinstance(value, type) and is_typeddict(value) and "__pydantic_config__" not in value.__dict__:
                        value.__pydantic_config__ = ConfigDict(extra="forbid")
        _STRICT.extend([TypeAdapter(CompletionCreateParamsNonStreaming), TypeAdapter(MessageCreateParamsNonStreaming)])
    return _STRICT[0], _STRICT[1]


def _consumed(value: Any) -> Any:
    """A validated value with every lazily validated iterable run through, so that its items are checked too."""
    if isinstance(value, dict):
        return {key: _consumed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, Iterator)):
        return [_consumed(item) for item in value]
    return value


def _without(body: dict[str, Any], fields: Collection[str], parts: Callable[[dict[str, Any]], list[Any]]) -> Any:
    """A copy of the body with these keys taken out of its assistant messages and of each of their parts."""
    body = copy.deepcopy(body)
    for message in body.get("messages", []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            for part in [message, *parts(message)]:
                if isinstance(part, dict):
                    for name in fields:
                        part.pop(name, None)
    return body


def check_openai_request(body: dict[str, Any], planted: Collection[str] = ()) -> None:
    """ValueError unless the openai SDK's own request types accept the body whole, but for the planted keys of
    assistant messages and their tool calls."""
    body = _without(body, planted, lambda message: message.get("tool_calls") or [])
    try:
        _consumed(_strict_adapters()[0].validate_python(body))
    except Exception as exc:  # pydantic's ValidationError, which names every field that is wrong
        raise ValueError(f"not a request the openai SDK accepts: {exc}") from None


def check_anthropic_request(body: dict[str, Any], planted: Collection[str] = ()) -> None:
    """ValueError unless the anthropic SDK's own request types accept the body whole, but for the planted keys of
    assistant messages and their blocks."""
    body = _without(body, planted, lambda message: message["content"] if isinstance(message["content"], list) else [])
    try:
        _consumed(_strict_adapters()[1].validate_python(body))
    except Exception as exc:
        raise ValueError(f"not a request the anthropic SDK accepts: {exc}") from None
