"""The openai backend: Chat Completions with tools, for OpenAI and every API that copies it."""

from __future__ import annotations

from typing import Any

from backends.options import (
    MAX_TOKENS,
    MAX_TOKENS_FIELD,
    OPENAI,
    OPENAI_API_KEY,
    OPENAI_BASE_URL,
    REASONING_EFFORT,
    TEMPERATURE,
)
from backends.provider import ProviderBackend, ProviderSettings, result_text
from harness.leaks import NO_SECRETS, Secrets
from harness.records import AgentRequest, AgentSurface, BackendError, Reply, Turn, replace
from harness.settings import Sources
from harness.text import blank


class OpenAIChatBackend(ProviderBackend):
    """POST {base}/chat/completions: the system prompt and the task prompt as messages, the tools as functions."""

    NAME = "openai"
    USAGE = ("prompt_tokens", "completion_tokens")
    BASE_URL = OPENAI_BASE_URL
    API_KEY = OPENAI_API_KEY
    SETTINGS = OPENAI

    @classmethod
    def configure(cls, sources: Sources) -> ProviderSettings:
        """The providers' settings, and the name the server knows the token limit by."""
        return replace(super().configure(sources), max_tokens_field=sources.get(MAX_TOKENS_FIELD))

    def __init__(
        self, settings: ProviderSettings, surface: AgentSurface, run_id: str, hidden: Secrets = NO_SECRETS
    ) -> None:
        headers = {"Authorization": f"Bearer {settings.key}"} if settings.key else {}
        super().__init__(settings, surface, settings.url.rstrip("/") + "/chat/completions", headers, hidden)
        self.tool_entries = {
            tool.name: {
                "type": "function",
                "function": {
                    "name": self.names.provider(tool.name),
                    "description": tool.description,
                    "parameters": dict(tool.input_schema),
                },
            }
            for tool in surface.tools
        }
        self.request_base = {
            "model": settings.model,
            "tools": list(self.tool_entries.values()),
            "tool_choice": "auto",
            settings.max_tokens_field: settings.max_tokens,
            **({"temperature": settings.temperature} if settings.temperature is not None else {}),
            **({"reasoning_effort": settings.reasoning_effort} if settings.reasoning_effort is not None else {}),
        }
        if not surface.tools:
            del self.request_base["tools"], self.request_base["tool_choice"]  # the API refuses tool_choice alone
        field = settings.max_tokens_field
        hints = {
            "temperature": f"unset {TEMPERATURE.var}; this model takes no temperature",
            "reasoning_effort": f"unset {REASONING_EFFORT.var}, or choose a level this model takes",
            field: f"{MAX_TOKENS_FIELD.var}=max_completion_tokens"
            if field == "max_tokens"
            else f"lower {MAX_TOKENS.var}, or {MAX_TOKENS_FIELD.var}=max_tokens on a server that knows only that name",
            "tool_choice": "tool_choice auto goes with the task file's tools: this model or server may take no tools",
        }
        self.hints = {name: hint for name, hint in hints.items() if name in self.request_base}

    def run(self, request: AgentRequest) -> Reply:
        """One completion for the conversation so far; its tool calls mapped back to the task file's names."""
        messages = [{"role": "system", "content": self.surface.system}] if self.surface.system else []
        for turn in (*request.history, Turn(request.prompt, request.steps)):
            messages.append({"role": "user", "content": turn.user})
            for step in turn.steps:
                messages.append(step.reply.native)
                messages += [
                    {"role": "tool", "tool_call_id": result.call.call_id, "content": result_text(result)}
                    for result in step.results
                ]
        return self.reply(*self.post(self.offering({**self.request_base, "messages": messages}, request)))

    def read(self, body: Any, attempts: int, usage: tuple[int, int] | None) -> Reply:
        """A completion as a Reply: its calls, else its text as a refusal; cut short or blank, an error."""
        try:
            choice = body["choices"][0]
            message = choice["message"]
            raw_calls = [
                (call["function"]["name"], call["function"].get("arguments"), self.call_id(call.get("id"), "call_h"))
                for call in message.get("tool_calls") or []
            ]
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise BackendError("reply:bad-provider-reply", f"not a chat completion: no {exc}", attempts) from None
        calls = [self.tool_call(name, args, call_id) for name, args, call_id in raw_calls]
        if not calls and message.get("function_call"):  # a call all the same: read as text, it would pass a refusal
            reason = "a call in function_call (the deprecated functions API), not in tool_calls"
            raise BackendError("reply:bad-provider-reply", reason, attempts)
        content, refusal = _text_of(message.get("content")), message.get("refusal")
        said = [value for value in (content, refusal) if isinstance(value, str) and value]
        text = next((value for value in said if not blank(value)), said[0] if said else None)
        finish_reason = choice.get("finish_reason")
        # The provider's own word that it refused: the message's refusal, or a content filter (through LiteLLM, also
        # Claude's refusal stop), its text kept; with no call, a refusal whatever the text, never a blank reply.
        stated = "refusal" if isinstance(refusal, str) and refusal else None
        stated = stated or ("content_filter" if finish_reason == "content_filter" else None)
        if not calls and not stated and finish_reason == "tool_calls":
            reason = "finish_reason tool_calls, but the message has no tool_calls"
            raise BackendError("reply:bad-provider-reply", reason, attempts)
        if not calls and not stated and finish_reason == "length":
            reason = "the completion was cut short (finish_reason length) before any tool call"
            raise BackendError("reply:truncated", reason, attempts)
        if not calls and not stated and finish_reason == "error":  # OpenRouter's: the upstream failed mid-reply
            reason = "the completion stopped on an error (finish_reason error) before any tool call"
            raise BackendError("reply:provider-error", reason, attempts)
        if not calls and not stated and blank(text):
            raise BackendError("reply:empty", "a blank completion: no tool call, no text", attempts)
        # The assistant message goes back as it came, every field of it and of each call (Gemini's thought signature
        # in extra_content, reasoning_content...), each call under the id it came with or the one we gave it.
        native = dict(message)
        if raw_calls:
            native["tool_calls"] = [
                {**call, "id": call_id} for call, (_, _, call_id) in zip(message["tool_calls"], raw_calls, strict=True)
            ]
        return Reply(
            tool_calls=tuple(calls),
            refused=not calls,
            text=text,
            attempts=attempts,
            usage=usage,
            refused_by_provider=None if calls else stated,
            native=native,
        )


def _text_of(content: Any) -> Any:
    """A message's content as text: as it is, or, a list of typed parts (Mistral's reasoning models, some servers that
    copy the API), its text parts joined, its thinking parts left out."""
    if not isinstance(content, list):
        return content
    return "".join(
        part["text"]
        for part in content
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )
