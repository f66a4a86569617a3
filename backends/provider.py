"""What the provider backends share: the tool-name table, the transport, and the errors providers send."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from backends.toolnames import ToolNames
from backends.transport import RETRY_STATUSES, Transport, snippet
from harness.config import Config
from harness.records import AgentSurface, BackendError, ToolCall

# A provider that rejects the key rejects it for every task: the run stops after the first.
KEY_REJECTED = "reply:key-rejected"


class ProviderBackend:
    """A model behind a provider's API, given the agent's tools and system prompt."""

    def __init__(self, config: Config, surface: AgentSurface, url: str, headers: Mapping[str, str], retry_statuses: frozenset[int] = RETRY_STATUSES) -> None:
        self.names = ToolNames(tool.name for tool in surface.tools)
        self._first_lock = threading.Lock()
        self._first_done = False
        self._rejected: str | None = None
        self.surface = surface
        self.model = config.model
        self.key_variable = config.key_variable
        self.temperature = config.temperature
        self.max_tokens = config.max_tokens
        self.transport = Transport(
            url,
            headers={**headers, **config.agent_headers},
            timeout=config.timeout,
            retries=config.retries,
            max_response_bytes=config.max_response_bytes,
            retry_statuses=retry_statuses,
            error_text=provider_error_text,
        )

    def describe(self) -> dict[str, Any]:
        """Settings fit to print and record: the URL with credentials and query masked, the model."""
        settings = {"url": self.transport.shown_url, "model": self.model, "timeout": self.transport.timeout, "retries": self.transport.retries}
        if self.temperature is not None:
            settings["temperature"] = self.temperature
        return settings

    def post(self, payload: Mapping[str, Any]) -> tuple[Any, int]:
        """The provider's decoded reply and the attempts it took; a rejected key becomes the error that stops the run."""
        if not self._first_done:
            # The first request goes alone: a key the provider rejects is then rejected once, not once per worker.
            with self._first_lock:
                if not self._first_done:
                    try:
                        return self._post(payload)
                    finally:
                        self._first_done = True
        if self._rejected is not None:
            raise BackendError(KEY_REJECTED, self._rejected, attempts=0)  # not sent: the key was already refused
        return self._post(payload)

    def _post(self, payload: Mapping[str, Any]) -> tuple[Any, int]:
        try:
            body, attempts = self.transport.post_json(payload)
        except BackendError as err:
            if err.code == "reply:auth":
                reason = f"{self.key_variable} was rejected by {self.transport.shown_url}: {err.reason}"
                self._rejected = reason
                raise BackendError(KEY_REJECTED, reason, err.attempts) from None
            raise
        if not isinstance(body, dict):
            raise BackendError("reply:bad-provider-reply", f"expected a JSON object from the provider{snippet(json.dumps(body).encode())}", attempts)
        return body, attempts

    def tool_call(self, name: Any, args: Any) -> ToolCall:
        """A call in the task file's names; arguments that are not an object make a call that fails, not a crash."""
        if not isinstance(name, str) or not name:
            raise BackendError("reply:bad-provider-reply", f"a tool call without a name: {json.dumps(name)}")
        name = self.names.original(name)
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except (ValueError, RecursionError):
                return ToolCall(name, {}, f"arguments are not JSON: {snippet(args.encode())[2:]}")
        if not isinstance(args, dict):
            return ToolCall(name, {}, f"arguments are not a JSON object: {snippet(json.dumps(args).encode())[2:]}")
        return ToolCall(name, args)


def tokens(given: Any, received: Any) -> tuple[int, int] | None:
    """(input, output) tokens as the provider reported them, when it did."""
    return (given, received) if isinstance(given, int) and isinstance(received, int) else None


def provider_error_text(body: bytes) -> str:
    """`: <the provider's error message>` (OpenAI and Anthropic both send {"error": {"message": ...}}), else the body's start."""
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return snippet(body)
    return f": {message}" if isinstance(message, str) and message else snippet(body)
