"""The agent contract: the conversation as a request carries it, and the reply, a JSON object with toolCall/toolCalls,
refused and text, the tokens the agent spent (usage) when it says, and its error when it failed after what it did."""

from __future__ import annotations

import json
from typing import Any

from backends.tokens import token_count
from harness.leaks import NO_SECRETS, Secrets, said_in
from harness.records import AgentRequest, BackendError, Reply, ToolCall
from harness.text import JSON_DEPTH, blank, kind, nested_deeper

ANSWER_KEYS = ("toolCall", "toolCalls", "refused", "text")
REPLY_KEYS = (*ANSWER_KEYS, "error")
BLANK = "a blank reply: no tool call, no refusal, no text"
AGENT_ERROR = "reply:agent-error"
SHOWN = 200  # characters of the agent's error message a reason shows


def conversation_messages(request: AgentRequest) -> list[dict[str, Any]]:
    """The conversation so far as `messages`: each user message, then each of the agent's replies to it (its text and
    its calls), ending with the newest user message."""
    messages: list[dict[str, Any]] = []
    for turn in request.history:
        messages.append({"role": "user", "content": turn.user})
        for step in turn.steps:
            calls = [{"name": call.name, "args": dict(call.args)} for call in step.reply.tool_calls]
            messages.append({"role": "assistant", "content": step.reply.text, "toolCalls": calls})
    messages.append({"role": "user", "content": request.prompt})
    return messages


def parse_reply(body: Any, attempts: int = 1, hidden: Secrets = NO_SECRETS) -> Reply:
    """Turn a decoded reply object, had in `attempts` tries, into a Reply; BackendError when it breaks the contract,
    quoting the reply with the values in `hidden` masked before anything is cut, and saying every string it holds but
    its error (`said`), which the scorer reads for leaks: a reply that also breaks the contract has leaked what it says,
    where the agent's own error message, which may quote a key to say what failed, is no leak, as in a valid reply."""
    try:
        return _reply(body, attempts, hidden)
    except BackendError as err:
        err.said = said_in({k: v for k, v in body.items() if k != "error"} if isinstance(body, dict) else body)
        raise


def _reply(body: Any, attempts: int, hidden: Secrets) -> Reply:
    """parse_reply's reading of the contract."""
    if not isinstance(body, dict):
        raise BackendError("reply:not-object", f"expected a JSON object, got {_kind(body, hidden)}")
    # A blank reply is an error, not a refusal: a crashed agent must not pass the safety task.
    if body.keys().isdisjoint(REPLY_KEYS):
        raise BackendError("reply:empty", "the reply holds none of toolCall, toolCalls, refused, text, error")
    calls: list[ToolCall] = []
    if body.get("toolCalls") is not None:
        if not isinstance(body["toolCalls"], list):
            raise BackendError("reply:bad-call", f"toolCalls: expected a list, got {_kind(body['toolCalls'], hidden)}")
        calls = [_tool_call(item, f"toolCalls[{i}]", hidden) for i, item in enumerate(body["toolCalls"])]
    if body.get("toolCall") is not None:
        single = _tool_call(body["toolCall"], "toolCall", hidden)
        if not calls:
            calls = [single]
        elif single not in calls:
            raise BackendError(
                "reply:bad-call", "toolCall is not one of toolCalls; send one list, or a toolCall that repeats an entry"
            )
    refused = body.get("refused")
    if refused is not None and not isinstance(refused, bool):
        raise BackendError("reply:bad-refused", f"refused: expected a boolean, got {_kind(refused, hidden)}")
    text = body.get("text")
    if text is not None and not isinstance(text, str):
        raise BackendError("reply:bad-text", f"text: expected a string, got {_kind(text, hidden)}")
    error = body.get("error")
    if error is not None and not isinstance(error, str):
        raise BackendError("reply:bad-error", f"error: expected a string, got {_kind(error, hidden)}")
    # Saying there is no call (toolCall: null, toolCalls: []) says nothing: an agent whose model came back empty must
    # not pass a refusal task.
    if error is None and not calls and not refused and blank(text):
        raise BackendError("reply:empty", BLANK)
    usage = _usage(body.get("usage"), hidden)
    # An agent that failed after it called tools says so beside its calls: the trial is an error, and the calls are
    # still judged (a forbidden one, a leaked secret).
    said = None if error is None or blank(error) else hidden.clip(error, SHOWN)
    return Reply(
        tool_calls=tuple(calls),
        refused=bool(refused),
        text=text,
        error_code=None if error is None else AGENT_ERROR,
        error=None if error is None else f"the agent failed: {said}" if said else "the agent failed, and said no more",
        attempts=attempts,
        usage=usage,
        refusal_stated=bool(refused),
    )


def partial_reply(output: bytes) -> dict[str, Any] | None:
    """What a failed exchange sent (an error status's body, a failed command's output) when it is a reply that says
    what the agent did before it failed: a JSON object with a string error beside toolCall, toolCalls, refused or
    text; else None."""
    try:
        body = json.loads(output)
    except (ValueError, RecursionError):
        return None
    if isinstance(body, dict) and isinstance(body.get("error"), str) and not body.keys().isdisjoint(ANSWER_KEYS):
        return body
    return None


def _usage(usage: Any, hidden: Secrets) -> tuple[int, int] | None:
    """(input, output) tokens from `{"inputTokens": N, "outputTokens": N}`; None when the agent said nothing of them."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        expected = "an object with inputTokens and outputTokens"
        raise BackendError("reply:bad-usage", f"usage: expected {expected}, got {_kind(usage, hidden)}")
    given, received = (token_count(usage.get(key), f"usage.{key}", hidden) for key in ("inputTokens", "outputTokens"))
    return given, received


def _kind(value: Any, hidden: Secrets) -> str:
    """What the value is, as text.kind says it (the start of a string), its secrets masked first."""
    return kind(hidden.mask_json(value))


def _tool_call(item: Any, where: str, hidden: Secrets) -> ToolCall:
    if not isinstance(item, dict):
        raise BackendError("reply:bad-call", f"{where}: expected an object, got {_kind(item, hidden)}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise BackendError("reply:bad-call", f"{where}.name: expected a non-empty string, got {_kind(name, hidden)}")
    args = item.get("args")
    if args is None:
        args = {}
    elif isinstance(args, str):
        # OpenAI-style agents pass arguments through as a JSON string.
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            raise BackendError(
                "reply:bad-args",
                f"{where}.args: a string that is not JSON: {json.dumps(hidden.clip(args, 80), ensure_ascii=False)}",
            ) from None
    if not isinstance(args, dict):
        raise BackendError("reply:bad-args", f"{where}.args: expected an object, got {_kind(args, hidden)}")
    if nested_deeper(args, JSON_DEPTH):  # the harness masks, judges and writes them by recursion
        raise BackendError("reply:bad-args", f"{where}.args: nested more than {JSON_DEPTH} levels deep")
    return ToolCall(name=name, args=args)
