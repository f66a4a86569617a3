"""The openai-responses backend: OpenAI's Responses API with function tools, stateless.

Nothing is stored at OpenAI (`store: false`): each request carries the whole conversation as input items, every output
item of a step sent back as it came (a reasoning model's reasoning items with their encrypted content, which it needs
to go on from its calls), then a function_call_output per played-back result.
"""

from __future__ import annotations

from typing import Any

from backends.options import (
    MAX_TOKENS,
    OPENAI_API_KEY,
    OPENAI_BASE_URL,
    OPENAI_RESPONSES,
    REASONING_EFFORT,
    TEMPERATURE,
)
from backends.provider import ProviderBackend, ProviderSettings, result_text
from harness.leaks import NO_SECRETS, Secrets
from harness.records import AgentRequest, AgentSurface, BackendError, Reply, Turn
from harness.text import blank, kind

# The statuses of a response that has ended, failed aside; a response without one is read as completed (a server that
# copies the API may leave it out).
FINISHED = frozenset({"completed", "incomplete"})


class OpenAIResponsesBackend(ProviderBackend):
    """POST {base}/responses: the system prompt as instructions, the conversation as input items, the tools as
    functions."""

    NAME = "openai-responses"
    NAMED_ONLY = True  # its settings are the openai backend's: a model and an OpenAI key alone still mean openai
    BASE_URL = OPENAI_BASE_URL
    API_KEY = OPENAI_API_KEY
    SETTINGS = OPENAI_RESPONSES

    def __init__(
        self, settings: ProviderSettings, surface: AgentSurface, run_id: str, hidden: Secrets = NO_SECRETS
    ) -> None:
        headers = {"Authorization": f"Bearer {settings.key}"} if settings.key else {}
        super().__init__(settings, surface, settings.url.rstrip("/") + "/responses", headers, hidden)
        self.tool_entries = {
            tool.name: {
                "type": "function",
                "name": self.names.provider(tool.name),
                "description": tool.description,
                "parameters": dict(tool.input_schema),
                # The API's default, strict, refuses a schema with an optional key or an open object, as most have.
                "strict": False,
            }
            for tool in surface.tools
        }
        tools = list(self.tool_entries.values())
        self.request_base = {
            "model": settings.model,
            **({"instructions": surface.system} if surface.system else {}),
            **({"tools": tools, "tool_choice": "auto"} if tools else {}),
            "store": False,
            "include": ["reasoning.encrypted_content"],
            "max_output_tokens": settings.max_tokens,
            **({"reasoning": {"effort": settings.reasoning_effort}} if settings.reasoning_effort else {}),
            **({"temperature": settings.temperature} if settings.temperature is not None else {}),
        }
        hints = {
            "temperature": f"unset {TEMPERATURE.var}; this model takes no temperature",
            "reasoning": f"unset {REASONING_EFFORT.var}, or choose a level this model takes",
            "max_output_tokens": f"lower {MAX_TOKENS.var}",
            "tool_choice": "tool_choice auto goes with the task file's tools: this model or server may take no tools",
        }
        self.hints = {name: hint for name, hint in hints.items() if name in self.request_base}
        self.hints["encrypted content"] = "a model that does not reason: check it with EVAL_BACKEND=openai instead"

    def run(self, request: AgentRequest) -> Reply:
        """One response for the conversation so far; its function calls mapped back to the task file's names."""
        items: list[Any] = []
        for turn in (*request.history, Turn(request.prompt, request.steps)):
            items.append({"role": "user", "content": turn.user})
            for step in turn.steps:
                items += step.reply.native
                items += [
                    {"type": "function_call_output", "call_id": result.call.call_id, "output": result_text(result)}
                    for result in step.results
                ]
        return self.reply(*self.post(self.offering({**self.request_base, "input": items}, request)))

    def read(self, body: Any, attempts: int, usage: tuple[int, int] | None) -> Reply:
        """A response as a Reply: its function calls, else its text or stated refusal; failed, cut short or blank, an
        error."""
        error = body.get("error")
        if body.get("status") == "failed" or error:
            code, message = (error.get("code"), error.get("message")) if isinstance(error, dict) else (None, None)
            named = f" ({code})" if isinstance(code, str) and code else ""
            named += f": {self.hidden.clip(message, 200)}" if isinstance(message, str) and message else ""
            raise BackendError("reply:provider-error", f"the response failed{named}", attempts)
        status = body.get("status")
        if status is not None and not (isinstance(status, str) and status in FINISHED):
            # Cancelled, or still under way (queued, in_progress): its text or calls so far are not its reply.
            shown = self.hidden.clip(status, 80) if isinstance(status, str) else kind(status)
            why = f"the response's status is {shown}, not completed: what it holds is not the model's whole reply"
            raise BackendError("reply:bad-provider-reply", why, attempts)
        try:
            items = body["output"]
            raw_calls = [
                (item["name"], item.get("arguments"), self.call_id(item.get("call_id"), "call_h"))
                for item in items
                if item["type"] == "function_call"
            ]
            parts = [part for item in items if item["type"] == "message" for part in item["content"]]
            texts = [part["text"] for part in parts if part["type"] == "output_text"]
            refusals = [part["refusal"] for part in parts if part["type"] == "refusal"]
            # A call of another kind (a custom or hosted tool) is still a call: read as text, it would pass a refusal.
            other = next((typed for item in items if _other_call(typed := item["type"])), None)
        except (KeyError, TypeError, AttributeError) as exc:
            raise BackendError("reply:bad-provider-reply", f"not a response: no {exc}", attempts) from None
        if other is not None:
            offered = "a call of a tool the harness did not offer (it offers function tools only)"
            shown = self.hidden.clip(other, 80)
            raise BackendError("reply:bad-provider-reply", f"an output item of type {shown}: {offered}", attempts)
        calls = [self.tool_call(name, args, call_id) for name, args, call_id in raw_calls]
        said = ["\n".join(t for t in found if isinstance(t, str)) for found in (texts, refusals)]
        text = next((value for value in said if not blank(value)), next(filter(None, said), None))
        refused_by = "refusal" if refusals else None
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if not calls and body.get("status") == "incomplete":
            if reason != "content_filter":
                why = f"the response is incomplete ({reason or 'no reason given'}) before any function call"
                raise BackendError("reply:truncated", why, attempts)
            refused_by = "content_filter"
        if not calls and refused_by is None and blank(text):
            raise BackendError("reply:empty", "a blank response: no function call, no text", attempts)
        # The output items as the next request must carry them: each as it came, a call under the id it is known by.
        ids = iter(call_id for _, _, call_id in raw_calls)
        native = [{**item, "call_id": next(ids)} if item["type"] == "function_call" else item for item in items]
        return Reply(
            tool_calls=tuple(calls),
            refused=not calls,
            text=text,
            attempts=attempts,
            usage=usage,
            refused_by_provider=refused_by if not calls else None,
            native=native,
        )


def _other_call(kind: Any) -> bool:
    """Whether an output item's type is a call of anything but a function tool (custom_tool_call, mcp_call...)."""
    return isinstance(kind, str) and kind.endswith("_call") and kind != "function_call"
