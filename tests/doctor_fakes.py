"""A loopback OpenAI Chat Completions server that plays a model for doctor's probes, with quirks a test switches on.

Each quirk is one that real servers have, answered in their own wording: a reasoning model that refuses temperature
or max_tokens (OpenAI's 400s), a local server started without a tool parser (the call written as text), a server
that makes one call per reply, Gemini's OpenAI-compatible endpoint wanting its `extra_content` back on a call, and a
key the server rejects; and a gateway that loses a call's arguments.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.gemini_fake import gemini_error, gemini_response
from tests.providers import anthropic_error, anthropic_message, openai_completion, openai_error
from tests.support import Received, send_json

QUIRKS = frozenset(
    {
        "refuses-temperature",
        "refuses-max-tokens",
        "calls-as-text",
        "one-call-per-reply",
        "needs-extra-content-back",
        "rejects-key",
        "drops-arguments",
    }
)
ANTHROPIC_QUIRKS = frozenset({"refuses-temperature", "one-call-per-reply", "rejects-key"})
GEMINI_QUIRKS = frozenset({"refuses-thinking"})
SIGNATURE = {"google": {"thought_signature": "c2lnbmVkIGJ5IHRoZSBmYWtl"}}
# Gemini's OpenAI-compatible endpoint, when a call comes back without the signature it was sent with.
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance."
)


def doctor_fake(quirks: Collection[str], provider: str = "openai") -> Any:
    """A model that does what each of doctor's prompts asks, as a server of the provider's API with these quirks."""
    unknown = set(quirks) - {"openai": QUIRKS, "anthropic": ANTHROPIC_QUIRKS, "gemini": GEMINI_QUIRKS}[provider]
    if unknown:
        raise ValueError(f"no such quirk of {provider}: {sorted(unknown)}")

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        if provider == "openai":
            status, body = answer(received.json, received.headers.get("Authorization", ""), quirks)
        elif provider == "gemini":
            status, body = answer_gemini(received.json, quirks)
        else:
            status, body = answer_anthropic(received.json, quirks)
        send_json(handler, body, status)

    return respond


def answer(request: dict[str, Any], authorization: str, quirks: Collection[str]) -> tuple[int, dict[str, Any]]:
    """The status and body a server with these quirks sends for one request."""
    if "rejects-key" in quirks:
        # A gateway that quotes the key it refuses: what doctor prints must not.
        key = authorization.removeprefix("Bearer ")
        return openai_error(401, f"Incorrect API key provided: {key}. You can find your API key in your dashboard.")
    if "refuses-temperature" in quirks and "temperature" in request:
        value = json.dumps(request["temperature"])
        message = f"Unsupported value: 'temperature' does not support {value} with this model. "
        return openai_error(400, message + "Only the default (1) value is supported.")
    if "refuses-max-tokens" in quirks and "max_tokens" in request:
        message = "Unsupported parameter: 'max_tokens' is not supported with this model. "
        return openai_error(400, message + "Use 'max_completion_tokens' instead.")
    messages = request["messages"]
    if "needs-extra-content-back" in quirks:
        for message in messages:
            for call in message.get("tool_calls") or []:
                if call.get("extra_content") != SIGNATURE:
                    return openai_error(400, MISSING_SIGNATURE)
    last = messages[-1]
    if last["role"] == "tool":
        return 200, openai_completion([], f"The tool returned {last['content']}.")
    calls = wanted_calls(last["content"], names={tool["function"]["name"] for tool in request.get("tools", [])})
    if "one-call-per-reply" in quirks:
        calls = calls[:1]
    if "drops-arguments" in quirks:  # a gateway that loses them translating between APIs
        calls = [{**call, "args": {}} for call in calls]
    if calls and "calls-as-text" in quirks:
        # A Qwen or Hermes chat template's markup, left in the content by a server without a tool parser.
        marked = [json.dumps({"name": call["name"], "arguments": call["args"]}) for call in calls]
        text = "\n".join(f"<tool_call>\n{call}\n</tool_call>" for call in marked)
        return 200, openai_completion([], text)
    completion = openai_completion(calls, None if calls else "ready")
    if "needs-extra-content-back" in quirks:
        for call in completion["choices"][0]["message"].get("tool_calls", []):
            call["extra_content"] = SIGNATURE
    return 200, completion


def wanted_calls(prompt: str, names: Collection[str]) -> list[dict[str, Any]]:
    """The calls a prompt asks for, of the tools the request offers: each tool named in it, with the probe's args."""
    args = {"doctor_echo": {"text": "ping"}, "doctor_add": {"a": 2, "b": 3}}
    said = sorted((prompt.find(name), name) for name in names if name in prompt)
    return [{"name": name, "args": args.get(name, {})} for _, name in said]


def answer_anthropic(request: dict[str, Any], quirks: Collection[str]) -> tuple[int, dict[str, Any]]:
    """The status and body a Messages API server with these quirks sends for one request."""
    if "rejects-key" in quirks:
        return anthropic_error(401, "authentication_error", "invalid x-api-key")
    if "refuses-temperature" in quirks and "temperature" in request:
        # Anthropic's wording for the models that take no temperature.
        return anthropic_error(400, "invalid_request_error", "`temperature` is deprecated for this model.")
    last = request["messages"][-1]["content"]
    if isinstance(last, list):
        results = [block["content"] for block in last if block["type"] == "tool_result"]
        return 200, anthropic_message([], f"The tool returned {results[0]}.")
    calls = wanted_calls(last, names={tool["name"] for tool in request.get("tools", [])})
    if "one-call-per-reply" in quirks:
        calls = calls[:1]
    return 200, anthropic_message(calls, None if calls else "ready")


def answer_gemini(request: dict[str, Any], quirks: Collection[str]) -> tuple[int, dict[str, Any]]:
    """The status and body a generateContent server with these quirks sends for one request."""
    if "refuses-thinking" in quirks and "thinkingConfig" in request["generationConfig"]:
        # Gemini's wording when a model does not take the thinking level or budget sent.
        return gemini_error(400, "INVALID_ARGUMENT", "Thinking level is not supported for this model.")
    last = request["contents"][-1]["parts"]
    results = [part["functionResponse"]["response"] for part in last if "functionResponse" in part]
    if results:
        return 200, gemini_response([], f"The tool returned {json.dumps(results[0])}.")
    names = {tool["name"] for group in request.get("tools", []) for tool in group["functionDeclarations"]}
    calls = wanted_calls(last[0]["text"], names)
    return 200, gemini_response(calls, None if calls else "ready")
