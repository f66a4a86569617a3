"""A loopback fake of the OpenAI Responses API, stateless as `store: false` makes it: every request carries the whole
conversation as input items, and the output items of each step must come back exactly as they were sent.

Like the chat and messages fakes (tests/providers.py), it answers in the documented shapes (the openai SDK's Response
parses them), checks every request against the SDK's own request type with unknown keys refused, and answers 400 to a
conversation whose items do not link up, as the API does.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.providers import Event, Policy, Unlinked, _consumed, _strict_adapters, openai_error, provider_name
from tests.support import CANNED, Received, Respond, send_json

USAGE = (100, 25)  # the input and output tokens of every response
Item = dict[str, Any]
# The output items a fake has sent, by id, to check that each comes back as it was.
Issued = dict[str, Item]


def reasoning_item(number: int, summary: str) -> Item:
    """A reasoning item, with the encrypted content a stateless conversation must send back untouched."""
    item_id = f"rs_{number}"
    sealed = hashlib.sha256(f"{item_id}:{summary}".encode()).hexdigest()
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": f"gAAAAB{sealed}",
    }


def response(
    calls: list[dict[str, Any]],
    text: str | None = None,
    *,
    refusal: str | None = None,
    reasoning: str = "",
    status: str = "completed",
    incomplete: str | None = None,
    arguments: list[str] | None = None,
    number: int = 1,
) -> dict[str, Any]:
    """A Response object: a reasoning item when `reasoning` is given, a message with the text and the refusal when
    given, then a function_call item per call; `arguments` overrides the JSON-encoded arguments (to send bad ones)."""
    output: list[Item] = [reasoning_item(number, reasoning)] if reasoning else []
    parts: list[Item] = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if text else []
    parts += [{"type": "refusal", "refusal": refusal}] if refusal is not None else []
    if parts:
        item_status = "incomplete" if status == "incomplete" else "completed"
        output.append(
            {"type": "message", "id": f"msg_{number}", "role": "assistant", "status": item_status, "content": parts}
        )
    output += [
        {
            "type": "function_call",
            "id": f"fc_{number}_{i}",
            "call_id": f"call_{number}_{i}",
            "name": call["name"],
            "arguments": arguments[i] if arguments else json.dumps(call["args"]),
            "status": "completed",
        }
        for i, call in enumerate(calls)
    ]
    given, received = USAGE
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 1764480000,
        "model": "fake-model",
        "status": status,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": None,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": given,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": received,
            "output_tokens_details": {"reasoning_tokens": 10 if reasoning else 0},
            "total_tokens": given + received,
        },
    }


def failed(code: str, message: str) -> dict[str, Any]:
    """A Response that failed: status failed, with its error object, and the tokens it cost."""
    return {**response([]), "status": "failed", "error": {"code": code, "message": message}}


def play_the_stub(events: list[Event]) -> tuple[list[Any], str | None]:
    """The stub's canned reply for the newest user message, at the step the conversation is at, in provider names."""
    last = max(i for i, event in enumerate(events) if event[0] == "user")
    step = sum(event[0] == "assistant" for event in events[last:])
    canned = CANNED[events[last][1]]
    reply = (canned if isinstance(canned, list) else [canned])[step]
    calls = reply.get("toolCalls") or ([reply["toolCall"]] if reply.get("toolCall") else [])
    return [(provider_name(call["name"]), call["args"]) for call in calls], reply.get("text")


def responses_events(items: list[Item], issued: Issued) -> list[Event]:
    """The conversation of a request's input items; Unlinked unless every output item sent back is one this fake sent,
    unchanged, every function_call comes with the reasoning item sent with it, and every call is answered by one
    function_call_output, after its response's items and before anything else, naming its call_id."""
    events: list[Event] = []
    waiting: dict[str, str] = {}  # call_id -> name, of the last response's calls
    sent_back: list[Item] = []  # the items of one response, as they come back

    def close_response() -> None:
        if not sent_back:
            return
        ids = {item["id"] for item in sent_back}
        for item in sent_back:
            if item["type"] == "function_call" and reasoning_of(item["id"]) not in ids:
                raise Unlinked(f"function_call {item['id']!r} was provided without its reasoning item")
        calls = [item for item in sent_back if item["type"] == "function_call"]
        waiting.update({item["call_id"]: item["name"] for item in calls})
        texts = [
            part["text"]
            for item in sent_back
            if item["type"] == "message"
            for part in item["content"]
            if part["type"] == "output_text"
        ]
        events.append(("assistant", "".join(texts) or None, [(c["name"], json.loads(c["arguments"])) for c in calls]))
        sent_back.clear()

    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call_output":
            close_response()
            if item["call_id"] not in waiting:
                raise Unlinked(f"input[{index}]: call_id {item['call_id']!r} answers no open call")
            events.append(("result", waiting.pop(item["call_id"]), item["output"]))
            continue
        if waiting:
            raise Unlinked(f"input[{index}]: the calls {sorted(waiting)} got no function_call_output")
        if kind == "message" and item.get("role") == "user":
            close_response()
            events.append(("user", item["content"]))
        elif issued.get(item.get("id", "")) == item:
            sent_back.append(item)
        else:
            raise Unlinked(f"input[{index}]: the {kind} item {item.get('id')!r} is not as it was sent")
    close_response()
    if waiting:
        raise Unlinked(f"the calls {sorted(waiting)} of the last response got no function_call_output")
    return events


def reasoning_of(call_item_id: str) -> str:
    """The id of the reasoning item sent with a function_call item: fc_7_1 came with rs_7."""
    return "rs_" + call_item_id.split("_")[1]


def responses_fake(policy: Policy, invalid: list[str], reasoning: str = "Thinking it over.") -> Respond:
    """A reasoning model playing `policy` out over the Responses API: a request the SDK's request type refuses is
    noted in `invalid`; one whose items do not link up, or whose items it sent come back changed, is answered 400."""
    numbers = itertools.count(1)  # item ids unique across every conversation the fake serves
    issued: Issued = {}

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        body = received.json
        try:
            check_responses_request(body)
        except ValueError as exc:
            invalid.append(str(exc))
        try:
            events = responses_events(body["input"], issued)
        except Unlinked as exc:
            status, error = openai_error(400, str(exc))
            send_json(handler, error, status)
            return
        named, text = policy(events)
        reply = response(
            [{"name": name, "args": args} for name, args in named],
            text,
            reasoning=reasoning,
            number=next(numbers),
        )
        issued.update({item["id"]: item for item in reply["output"]})
        send_json(handler, reply)

    return respond


_ADAPTER: list[Callable[[Any], Any]] = []


def check_responses_request(body: dict[str, Any]) -> None:
    """ValueError unless the openai SDK's own Responses request type accepts the body whole, unknown keys refused."""
    if not _ADAPTER:
        from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
        from pydantic import TypeAdapter

        _strict_adapters()  # every SDK request type loaded now refuses unknown keys: the Responses ones too
        _ADAPTER.append(TypeAdapter(ResponseCreateParamsNonStreaming).validate_python)
    try:
        _consumed(_ADAPTER[0](body))
    except Exception as exc:  # pydantic's ValidationError, which names every field that is wrong
        raise ValueError(f"not a request the openai SDK accepts: {exc}") from None
