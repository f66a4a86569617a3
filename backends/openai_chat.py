"""The openai backend: Chat Completions with tools, for OpenAI and every API that copies it."""

from __future__ import annotations

from backends.provider import ProviderBackend, tokens
from harness.config import Config
from harness.records import AgentRequest, AgentSurface, BackendError, Reply


class OpenAIChatBackend(ProviderBackend):
    """POST {base}/chat/completions: the system prompt and the task prompt as messages, the tool surface as functions."""

    def __init__(self, config: Config, surface: AgentSurface) -> None:
        assert config.agent_url is not None
        headers = {"Authorization": f"Bearer {config.agent_token}"} if config.agent_token else {}
        super().__init__(config, surface, config.agent_url.rstrip("/") + "/chat/completions", headers)
        self.request_base = {
            "model": config.model,
            "tools": [
                {
                    "type": "function",
                    "function": {"name": self.names.provider(tool.name), "description": tool.description, "parameters": dict(tool.input_schema)},
                }
                for tool in surface.tools
            ],
            "tool_choice": "auto",
            "temperature": config.temperature if config.temperature is not None else 0,
        }

    def run(self, request: AgentRequest) -> Reply:
        """One completion; its tool calls mapped back to the task file's names."""
        system = [{"role": "system", "content": self.surface.system}] if self.surface.system else []
        payload = {**self.request_base, "messages": [*system, {"role": "user", "content": request.prompt}]}
        if not self.surface.tools:
            del payload["tools"], payload["tool_choice"]  # the API rejects tool_choice without tools
        body, attempts = self.post(payload)
        try:
            message = body["choices"][0]["message"]
            calls = [self.tool_call(call["function"]["name"], call["function"].get("arguments")) for call in message.get("tool_calls") or []]
        except (KeyError, IndexError, TypeError) as exc:
            raise BackendError("reply:bad-provider-reply", f"not a chat completion: no {exc}", attempts) from None
        text = message.get("content") or message.get("refusal")
        usage = body.get("usage") or {}
        return Reply(
            tool_calls=tuple(calls),
            refused=not calls,
            text=text if isinstance(text, str) else None,
            attempts=attempts,
            usage=tokens(usage.get("prompt_tokens"), usage.get("completion_tokens")),
        )

