"""A loopback fake of the Gemini API's generateContent, answering in its documented shapes, and refusing (400) what
Gemini refuses: a request its SDK's types do not take, a schema keyword outside its Schema object, a function call
sent back without the thoughtSignature it came with, results that do not answer the calls before them."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.providers import Event, Policy, Unlinked, canned_calls
from tests.support import Received, send_json

# generateContent's Schema object, as its reference lists it; Gemini answers 400 to any other key.
SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
REQUEST_KEYS = frozenset({"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"})
USAGE = {"promptTokenCount": 150, "candidatesTokenCount": 20, "thoughtsTokenCount": 15, "totalTokenCount": 185}


def signature(text: str) -> str:
    """A thoughtSignature as Gemini sends one: opaque base64."""
    return base64.b64encode(f"sig:{text}".encode()).decode()


def gemini_response(
    calls: list[dict[str, Any]],
    text: str | None = None,
    *,
    finish_reason: str = "STOP",
    ids: bool = True,
    thought: str | None = None,
    step: int = 1,
) -> dict[str, Any]:
    """A GenerateContentResponse: an optional thought, an optional text part, then a functionCall part per call, the
    first carrying a thoughtSignature (as Gemini 3 signs the first call of a step)."""
    parts: list[dict[str, Any]] = [{"text": thought, "thought": True}] if thought else []
    parts += [{"text": text}] if text else []
    for i, call in enumerate(calls):
        part: dict[str, Any] = {"functionCall": {"name": call["name"], "args": call["args"]}}
        if ids:
            part["functionCall"]["id"] = f"fc_{step}_{i}"
        if i == 0:
            part["thoughtSignature"] = signature(f"{step}-{call['name']}")
        parts.append(part)
    candidate: dict[str, Any] = {"finishReason": finish_reason, "index": 0}
    if parts:
        candidate["content"] = {"role": "model", "parts": parts}
    return {"candidates": [candidate], "usageMetadata": dict(USAGE), "modelVersion": "gemini-fake", "responseId": "r1"}


def gemini_error(status: int, name: str, message: str, reason: str | None = None) -> tuple[int, dict[str, Any]]:
    """Gemini's error body: {"error": {"code", "message", "status", "details"?}}."""
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if reason:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com"}
        ]
    return status, {"error": error}


def user_prompt(received: Received) -> str:
    return str(received.json["contents"][0]["parts"][0]["text"])


def schema_problems(schema: Any, path: str = "") -> list[str]:
    """Every key of a function's parameters that generateContent's Schema object does not take."""
    if not isinstance(schema, dict):
        return [f"{path}: not an object"]
    problems = [f"{path}.{key}" for key in schema if key not in SCHEMA_KEYS]
    for name, sub in (schema.get("properties") or {}).items():
        problems += schema_problems(sub, f"{path}.properties.{name}")
    if "items" in schema:
        problems += schema_problems(schema["items"], f"{path}.items")
    for i, sub in enumerate(schema.get("anyOf") or []):
        problems += schema_problems(sub, f"{path}.anyOf[{i}]")
    return problems


def check_gemini_request(body: dict[str, Any]) -> None:
    """ValueError unless the google-genai SDK's own types take every part of the body (unknown keys forbidden, bytes
    read as base64, as the REST API reads them) and every schema keeps to the Schema object's keys."""
    from google.genai import types

    kinds = {
        "systemInstruction": types.Content,
        "toolConfig": types.ToolConfig,
        "generationConfig": types.GenerationConfig,
    }
    try:
        if set(body) - REQUEST_KEYS:
            raise ValueError(f"unknown fields {sorted(set(body) - REQUEST_KEYS)}")
        for content in body["contents"]:
            types.Content.model_validate_json(json.dumps(content))
        for tool in body.get("tools", []):
            types.Tool.model_validate_json(json.dumps(tool))
            for declaration in tool.get("functionDeclarations", []):
                problems = schema_problems(declaration.get("parameters", {}))
                if problems:
                    raise ValueError(f"{declaration['name']}: the Schema object has no {', '.join(problems)}")
        for key, kind in kinds.items():
            if key in body:
                kind.model_validate_json(json.dumps(body[key]))
    except Exception as exc:  # pydantic's ValidationError, which names every field that is wrong
        raise ValueError(f"not a request the google-genai SDK accepts: {exc}") from None


def gemini_events(contents: list[dict[str, Any]], sent: dict[str, dict[str, Any]]) -> list[Event]:
    """The conversation of a generateContent request; Unlinked unless each model turn is one the fake sent, whole
    (`sent`, by turn_key), with every thoughtSignature on its part, and the user turn after
    one with calls answers each in order, by name and id."""
    events: list[Event] = []
    waiting: list[dict[str, Any]] = []
    for index, content in enumerate(contents):
        parts = content["parts"]
        if content.get("role") == "model":
            calls = [part["functionCall"] for part in parts if "functionCall" in part]
            text = "".join(part.get("text", "") for part in parts if not part.get("thought")) or None
            if sent.get(turn_key(content)) != content:
                raise Unlinked(f"contents[{index}]: not the model's turn as it was sent (a thoughtSignature lost?)")
            waiting = calls
            events.append(("assistant", text, [(call["name"], call["args"]) for call in calls]))
            continue
        answers = [part["functionResponse"] for part in parts if "functionResponse" in part]
        linked = [(a["name"], a.get("id")) for a in answers] == [(c["name"], c.get("id")) for c in waiting]
        if not linked or parts[: len(answers)] != [{"functionResponse": a} for a in answers]:
            raise Unlinked(f"contents[{index}]: the functionResponse parts do not answer the calls before, in order")
        events += [("result", answer["name"], json.dumps(answer["response"])) for answer in answers]
        events += [("user", part["text"]) for part in parts[len(answers) :]]
        waiting = []
    if waiting:
        raise Unlinked("the last model turn's calls got no functionResponse")
    return events


def turn_key(content: dict[str, Any]) -> str:
    """A model turn without its signatures: where the fake finds what it sent, to compare it whole."""
    parts = [{key: value for key, value in part.items() if key != "thoughtSignature"} for part in content["parts"]]
    return json.dumps(parts, sort_keys=True)


def conversation_fake(policy: Policy, invalid: list[str], *, ids: bool = True) -> Callable[..., None]:
    """Gemini playing `policy` out: a request the SDK's types refuse is noted in `invalid`, one whose history is not
    what was sent or whose results do not answer is answered 400 INVALID_ARGUMENT, as Gemini would."""
    sent: dict[str, dict[str, Any]] = {}

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        body = received.json
        try:
            check_gemini_request(body)
        except ValueError as exc:
            invalid.append(str(exc))
        try:
            events = gemini_events(body["contents"], sent)
        except Unlinked as exc:
            status, error = gemini_error(400, "INVALID_ARGUMENT", str(exc))
            send_json(handler, error, status)
            return
        named, text = policy(events)
        step = sum(event[0] == "assistant" for event in events) + 1
        reply = gemini_response([{"name": n, "args": a} for n, a in named], text, ids=ids, step=step)
        content = reply["candidates"][0]["content"]
        sent[turn_key(content)] = content
        send_json(handler, reply)

    return respond


def fake_gemini(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A model that thinks, then calls what the stub would; a sentence when it calls nothing; 400 to a request the
    SDK's types refuse."""
    try:
        check_gemini_request(received.json)
    except ValueError as exc:
        status, error = gemini_error(400, "INVALID_ARGUMENT", str(exc))
        send_json(handler, error, status)
        return
    calls = canned_calls(user_prompt(received))
    send_json(handler, gemini_response(calls, None if calls else "I can't share that.", thought="Which tool fits?"))
