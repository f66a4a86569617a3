"""The anthropic backend: the Messages API with tools."""

from __future__ import annotations

from backends.provider import ProviderBackend, tokens
from backends.transport import RETRY_STATUSES
from harness.config import Config
from harness.records import AgentRequest, AgentSurface, BackendError, Reply, Tool

API_VERSION = "2023-06-01"
OVERLOADED = 529


class AnthropicMessagesBackend(ProviderBackend):
    """POST {base}/v1/messages: the system prompt as `system`, the task prompt as the user message, the tool surface as tools."""

    def __init__(self, config: Config, surface: AgentSurface) -> None:
        assert config.agent_url is not None
        headers = {"anthropic-version": API_VERSION, **({"x-api-key": config.agent_token} if config.agent_token else {})}
        super().__init__(config, surface, config.agent_url.rstrip("/") + "/v1/messages", headers, RETRY_STATUSES | {OVERLOADED})
        self.request_base = {
            "model": config.model,
            "max_tokens": config.max_tokens,
            **({"tools": [self._tool(tool) for tool in surface.tools]} if surface.tools else {}),
            **({"system": surface.system} if surface.system else {}),
            **({"temperature": config.temperature} if config.temperature is not None else {}),
        }

    def _tool(self, tool: Tool) -> dict[str, object]:
        return {"name": self.names.provider(tool.name), "description": tool.description, "input_schema": dict(tool.input_schema)}

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "maxTokens": self.max_tokens}

    def run(self, request: AgentRequest) -> Reply:
        """One message; its tool_use blocks mapped back to the task file's names, its text blocks kept."""
        body, attempts = self.post({**self.request_base, "messages": [{"role": "user", "content": request.prompt}]})
        try:
            blocks = body["content"]
            calls = [self.tool_call(block["name"], block.get("input")) for block in blocks if block["type"] == "tool_use"]
            texts = [block["text"] for block in blocks if block["type"] == "text"]
        except (KeyError, TypeError) as exc:
            raise BackendError("reply:bad-provider-reply", f"not a message: no {exc}", attempts) from None
        usage = body.get("usage") or {}
        return Reply(
            tool_calls=tuple(calls),
            refused=not calls,
            text="\n".join(t for t in texts if isinstance(t, str)) or None,
            attempts=attempts,
            usage=tokens(usage.get("input_tokens"), usage.get("output_tokens")),
        )
