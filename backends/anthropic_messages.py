"""The anthropic backend: the Messages API with tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backends.options import (
    ANTHROPIC,
    ANTHROPIC_API_KEY,
    ANTHROPIC_BASE_URL,
    ANTHROPIC_TEMPERATURE,
    MAX_TOKENS,
    THINKING_BUDGET,
)
from backends.provider import ProviderBackend, ProviderSettings, result_text
from harness.leaks import NO_SECRETS, Secrets
from harness.records import (
    AgentRequest,
    AgentSurface,
    BackendError,
    ConfigError,
    Reply,
    Tool,
    ToolResult,
    Turn,
)
from harness.settings import Sources
from harness.text import blank

API_VERSION = "2023-06-01"
OVERLOADED = 529


class AnthropicMessagesBackend(ProviderBackend):
    """POST {base}/v1/messages: the system prompt as `system`, the task prompt as the user message, and the tools."""

    NAME = "anthropic"
    BASE_URL = ANTHROPIC_BASE_URL
    API_KEY = ANTHROPIC_API_KEY
    TEMPERATURE = ANTHROPIC_TEMPERATURE
    SETTINGS = ANTHROPIC
    RETRIED_TOO = frozenset({OVERLOADED})

    @classmethod
    def configure(cls, sources: Sources) -> ProviderSettings:
        """The providers' settings and the thinking budget, which the API takes only under the max tokens and with
        no temperature but 1."""
        settings = super().configure(sources)
        budget = settings.thinking_budget
        if budget is not None:
            where = sources.text(THINKING_BUDGET)[1]
            if budget >= settings.max_tokens:
                limit = sources.text(MAX_TOKENS)[1]
                raise ConfigError(
                    f"{where}: {budget} must be under {limit} ({settings.max_tokens}): Anthropic requires it"
                )
            if settings.temperature not in (None, 1):
                raise ConfigError(
                    f"{sources.text(cls.TEMPERATURE)[1]}: with {where} set, Anthropic takes only 1; leave it unset"
                )
        return settings

    def __init__(
        self, settings: ProviderSettings, surface: AgentSurface, run_id: str, hidden: Secrets = NO_SECRETS
    ) -> None:
        headers = {"anthropic-version": API_VERSION, **({"x-api-key": settings.key} if settings.key else {})}
        super().__init__(settings, surface, settings.url.rstrip("/") + "/v1/messages", headers, hidden)
        self.tool_entries = {tool.name: self._tool(tool) for tool in surface.tools}
        self.request_base = {
            "model": settings.model,
            "max_tokens": settings.max_tokens,
            **({"tools": list(self.tool_entries.values())} if surface.tools else {}),
            **({"system": surface.system} if surface.system else {}),
            **({"temperature": settings.temperature} if settings.temperature is not None else {}),
            **(
                {"thinking": {"type": "enabled", "budget_tokens": settings.thinking_budget}}
                if settings.thinking_budget is not None
                else {}
            ),
        }
        hints = {
            "temperature": f"unset {self.TEMPERATURE.var}; this model takes no temperature",
            "thinking": f"unset {THINKING_BUDGET.var}; this model does not think",
            "max_tokens": f"lower {MAX_TOKENS.var}",
        }
        self.hints = {name: hint for name, hint in hints.items() if name in self.request_base}

    def _tool(self, tool: Tool) -> dict[str, object]:
        return {
            "name": self.names.provider(tool.name),
            "description": tool.description,
            "input_schema": dict(tool.input_schema),
        }

    def run(self, request: AgentRequest) -> Reply:
        """One message for the conversation so far; its tool_use blocks mapped back to the task file's names."""
        messages: list[dict[str, Any]] = []
        for turn in (*request.history, Turn(request.prompt, request.steps)):
            messages.append({"role": "user", "content": turn.user})
            for step in turn.steps:
                messages.append({"role": "assistant", "content": step.reply.native})
                if step.results:  # one user message answers every tool_use of the one before, results first
                    messages.append({"role": "user", "content": [_tool_result(result) for result in step.results]})
        return self.reply(*self.post(self.offering({**self.request_base, "messages": messages}, request)))

    def read(self, body: Any, attempts: int, usage: tuple[int, int] | None) -> Reply:
        """A message as a Reply: its tool uses, else its text or stated refusal; cut short or blank, an error."""
        try:
            blocks = body["content"]
            uses = [
                (block["name"], block.get("input"), self.call_id(block.get("id"), "toolu_h"))
                for block in blocks
                if block["type"] == "tool_use"
            ]
            texts = [block["text"] for block in blocks if block["type"] == "text"]
            other = next((kind for block in blocks if _other_call(kind := block["type"])), None)
        except (KeyError, TypeError, AttributeError) as exc:
            raise BackendError("reply:bad-provider-reply", f"not a message: no {exc}", attempts) from None
        if other is not None and not uses:
            # A call of a server or MCP tool is still a call: read as text, it would pass a refusal. Beside calls of
            # the task's tools, those are judged, and its blocks go back as they came.
            offered = "a call of a tool the harness did not offer (it offers client tools only)"
            shown = self.hidden.clip(other, 80)
            raise BackendError("reply:bad-provider-reply", f"a content block of type {shown}: {offered}", attempts)
        calls = [self.tool_call(name, args, call_id) for name, args, call_id in uses]
        text = "\n".join(t for t in texts if isinstance(t, str)) or None
        stop_reason = body.get("stop_reason")
        if not calls and stop_reason == "tool_use":
            reason = "stop_reason tool_use, but the message has no tool_use block"
            raise BackendError("reply:bad-provider-reply", reason, attempts)
        if not calls and stop_reason in ("max_tokens", "model_context_window_exceeded"):
            reason = f"the message was cut short (stop_reason {stop_reason}) before any tool use"
            raise BackendError("reply:truncated", reason, attempts)
        if not calls and stop_reason == "pause_turn":
            # A long-running server tool paused the turn; resuming means sending it back, which a trial does not do.
            reason = "the turn was paused (stop_reason pause_turn) before any tool use; the harness does not resume it"
            raise BackendError("reply:truncated", reason, attempts)
        if not calls and blank(text) and stop_reason != "refusal":
            raise BackendError("reply:empty", "a blank message: no tool use, no text", attempts)
        return Reply(
            tool_calls=tuple(calls),
            refused=not calls,
            text=text,
            attempts=attempts,
            usage=usage,
            refused_by_provider="refusal" if not calls and stop_reason == "refusal" else None,
            native=_assistant_content(blocks, iter(call_id for _, _, call_id in uses)),
        )


def _other_call(kind: Any) -> bool:
    """Whether a content block's type is a call of anything but a client tool (server_tool_use, mcp_tool_use...)."""
    return isinstance(kind, str) and kind.endswith("tool_use") and kind != "tool_use"


def _assistant_content(blocks: list[Any], call_ids: Iterator[str]) -> list[Any]:
    """The message's blocks as the next request must send them back: every block as it came (thinking blocks, whose
    signatures the API checks, types we do not know), each tool_use under the id we answer it by; only empty text
    blocks, which the API refuses, are left out."""
    content: list[Any] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and not (isinstance(block.get("text"), str) and block["text"]):
            continue
        content.append({**block, "id": next(call_ids)} if kind == "tool_use" else block)
    return content


def _tool_result(result: ToolResult) -> dict[str, Any]:
    """A tool_result block answering its tool_use; a tool with no scripted result answers as an error."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call.call_id, "content": result_text(result)}
    if not result.answered:
        block["is_error"] = True
    return block
