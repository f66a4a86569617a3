"""Loopback fakes of the OpenAI Chat Completions and Anthropic Messages APIs, answering in their documented shapes."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support import CANNED, Received, send_json


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
