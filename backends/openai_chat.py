"""The openai backend: Chat Completions with tools, for OpenAI and every API that copies it."""

from __future__ import annotations

from backends.options import HEADERS, MAX_RESPONSE_BYTES, RETRIES, TIMEOUT
from backends.provider import MODEL, TEMPERATURE, ProviderBackend, ProviderSettings, api_key, base_url, tokens
from harness.records import AgentRequest, AgentSurface, BackendError, Reply


class OpenAIChatBackend(ProviderBackend):
    """POST {base}/chat/completions: the system prompt and the task prompt as messages, the tools as functions."""

    NAME = "openai"
    BASE_URL = base_url("OPENAI_BASE_URL", "https://api.openai.com/v1")
    API_KEY = api_key("OPENAI_API_KEY")
    SETTINGS = (MODEL, BASE_URL, API_KEY, HEADERS, TEMPERATURE, TIMEOUT, RETRIES, MAX_RESPONSE_BYTES)

    def __init__(self, settings: ProviderSettings, surface: AgentSurface, run_id: str) -> None:
        headers = {"Authorization": f"Bearer {settings.key}"} if settings.key else {}
        super().__init__(settings, surface, settings.url.rstrip("/") + "/chat/completions", headers)
        self.request_base = {
            "model": settings.model,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": self.names.provider(tool.name),
                        "description": tool.description,
                        "parameters": dict(tool.input_schema),
                    },
                }
                for tool in surface.tools
            ],
            "tool_choice": "auto",
            "temperature": settings.temperature if settings.temperature is not None else 0,
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
            calls = [
                self.tool_call(call["function"]["name"], call["function"].get("arguments"))
                for call in message.get("tool_calls") or []
            ]
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
