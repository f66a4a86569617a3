"""What the provider backends share: the tool-name table, the transport, the errors providers send (their settings are
in backends/options.py)."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from backends.options import (
    HEADERS,
    MAX_RESPONSE_BYTES,
    MAX_TOKENS,
    MODEL,
    REASONING_EFFORT,
    RETRIES,
    TEMPERATURE,
    THINKING_BUDGET,
    TIMEOUT,
)
from backends.tokens import token_count
from backends.toolnames import ToolNames
from harness import exchanges
from harness.endpoints import header_secrets, query_values, url_secrets
from harness.leaks import NO_SECRETS, Secrets, said_in
from harness.records import AgentRequest, AgentSurface, BackendError, Reply, ToolCall, ToolResult, field, record
from harness.settings import Setting, Sources
from harness.text import JSON_DEPTH, nested_deeper

# A provider that rejects the key rejects it for every task: the run stops after the first.
KEY_REJECTED = "reply:key-rejected"
# What a 4xx other than 401 and 403 says when the key or the account is the problem: a gateway (LiteLLM: "No connected
# db", when its key store is missing) or a provider (Gemini: "API key not valid") may answer 400 for it. This and STATUS
# are compiled (and cached by re) when an error first needs them, not by every run, which imports this module.
KEY_PROBLEM = (
    r"(?i)invalid[ _-]?(?:x-)?api[ _-]?key|incorrect api[ _-]?key|api key not valid|api_key_invalid|no connected db"
    r"|authentication[ _](?:error|failed)|invalid authentication"
)
STATUS = r"HTTP (4\d\d)\b"
MESSAGE_CHARS = 500  # of a provider's error message quoted in a reason: a gateway may send a page of it on every task


@record
class ProviderSettings:
    """Which API and model, with which key, and how long to wait."""

    url: str = field(repr=False)
    key: str | None = field(repr=False)
    key_variable: str  # where the key came from, for the message that says it was rejected
    model: str
    headers: Mapping[str, str] = field(repr=False)
    temperature: float | None
    timeout: float
    retries: int
    max_response_bytes: int
    max_tokens: int
    max_tokens_field: str = "max_tokens"  # the name the API knows the limit by
    reasoning_effort: str | None = None
    thinking_budget: int | None = None


class ProviderBackend:
    """A model behind a provider's API, given the agent's tools and system prompt; the harness plays its tools."""

    NAME = ""
    PLAYS_TOOLS = True
    BASE_URL: Setting
    API_KEY: Setting
    SETTINGS: tuple[Setting, ...]  # a provider reads the reasoning settings it declares
    RETRIED_TOO: frozenset[int] = frozenset()  # statuses this provider retries besides the transport's own
    USAGE = ("input_tokens", "output_tokens")  # what a reply's `usage` names its input and output tokens
    TEMPERATURE = TEMPERATURE  # the range this provider takes
    THINKING_BUDGET = THINKING_BUDGET  # the budgets this provider takes, when it reads the setting
    TOOL_KEYS = ("tools", "tool_choice")  # what a request leaves out when it offers no tool

    @classmethod
    def configure(cls, sources: Sources) -> ProviderSettings:
        """The model first (it has no default), then the API's URL and key, then the request settings."""
        model = sources.require(MODEL, cls.NAME)
        return ProviderSettings(
            url=sources.get(cls.BASE_URL),
            key=sources.get(cls.API_KEY),
            key_variable=cls.API_KEY.var,
            model=model,
            headers=sources.get(HEADERS),
            temperature=sources.get(cls.TEMPERATURE),
            timeout=sources.get(TIMEOUT),
            retries=sources.get(RETRIES),
            max_response_bytes=sources.get(MAX_RESPONSE_BYTES),
            max_tokens=sources.get(MAX_TOKENS),
            reasoning_effort=sources.get(REASONING_EFFORT) if REASONING_EFFORT in cls.SETTINGS else None,
            thinking_budget=sources.get(cls.THINKING_BUDGET) if cls.THINKING_BUDGET in cls.SETTINGS else None,
        )

    def __init__(
        self,
        settings: ProviderSettings,
        surface: AgentSurface,
        url: str,
        headers: Mapping[str, str],
        hidden: Secrets = NO_SECRETS,
    ) -> None:
        from backends.transport import RETRY_STATUSES, Transport  # only a run that sends anything pays for sockets

        self.names = ToolNames(tool.name for tool in surface.tools)
        self._ids = itertools.count(1)
        self._first_lock = threading.Lock()
        self._first_sent = False
        self._first_done = threading.Event()
        self._rejected: str | None = None
        self.hints: Mapping[str, str] = {}  # each parameter sent that a setting controls -> the hint a 400 names
        self.tool_entries: Mapping[str, Any] = {}  # each tool as this provider's requests offer it, by its name
        self.surface = surface
        self.settings = settings
        self.hidden = hidden | Secrets(self.secrets()) | Secrets(query_values([settings.url], self.BASE_URL.var))
        self.transport = Transport(
            url,
            headers={**headers, **settings.headers},
            timeout=settings.timeout,
            retries=settings.retries,
            max_response_bytes=settings.max_response_bytes,
            retry_statuses=RETRY_STATUSES | self.RETRIED_TOO,
            error_text=provider_error_text,
            hidden=self.hidden,
            usage=self.paced_usage,
        )

    def secrets(self) -> dict[str, str]:
        """The API key, credential-like header values, and the base URL's password and credential-like query values."""
        settings = self.settings
        return {
            **url_secrets(settings.url, self.BASE_URL.var),
            **header_secrets(settings.headers, HEADERS.var),
            **({settings.key: settings.key_variable} if settings.key else {}),
        }

    def describe(self) -> dict[str, Any]:
        """Settings fit to print and record: the URL with credentials and query masked (what of the query keys a
        cassette, as a digest), the model."""
        transport = self.transport
        settings = {
            "url": transport.shown_url,
            **({"query": transport.query} if transport.query else {}),
            "model": self.settings.model,
            "maxTokens": self.settings.max_tokens,
            "timeout": transport.timeout,
            "retries": transport.retries,
        }
        sent = {
            "temperature": self.settings.temperature,
            "reasoningEffort": self.settings.reasoning_effort,
            "thinkingBudget": self.settings.thinking_budget,
        }
        return {**settings, **{name: value for name, value in sent.items() if value is not None}}

    def offering(self, payload: dict[str, Any], request: AgentRequest) -> dict[str, Any]:
        """The request with the tools the agent has at this turn, for a task that narrows or adds them; else as it is,
        with the tools built once."""
        if request.tools is None:
            return payload
        if not request.tools:
            return {key: value for key, value in payload.items() if key not in self.TOOL_KEYS}
        return {**payload, "tools": self.tools_field([self.tool_entries[name] for name in request.tools])}

    def tools_field(self, entries: list[Any]) -> Any:
        """A request's `tools` offering these entries."""
        return entries

    def post(self, payload: Mapping[str, Any]) -> tuple[Any, int]:
        """The provider's decoded reply and the attempts it took; a rejected key becomes the error that stops a run."""
        if not self._first_done.is_set():
            # The first request goes alone: a key the provider rejects is then rejected once, not once per worker. The
            # others wait for it as the pacer waits for a first response: 5 s at most, and not in their latency.
            with self._first_lock:
                first, self._first_sent = not self._first_sent, True
            if first:
                try:
                    return self._post(payload)
                finally:
                    self._first_done.set()
            from backends.pacing import PROBE_WAIT

            started = time.monotonic()
            self._first_done.wait(PROBE_WAIT)
            exchanges.held(time.monotonic() - started)
        if self._rejected is not None:
            raise BackendError(KEY_REJECTED, self._rejected, attempts=0)  # not sent: the key was already refused
        return self._post(payload)

    def _post(self, payload: Mapping[str, Any]) -> tuple[Any, int]:
        try:
            body, attempts = self.transport.post_json(payload)
        except BackendError as err:
            status = re.match(STATUS, err.reason) if err.code == "reply:http-status" else None
            if err.code == "reply:auth" or (status and re.search(KEY_PROBLEM, err.reason)):
                reason = f"{self.settings.key_variable} was rejected by {self.transport.shown_url}: {err.reason}"
                self._rejected = reason
                raise BackendError(KEY_REJECTED, reason, err.attempts) from None
            if status and status[1] == "400":
                err.reason += parameter_hint(err.reason, self.hints)
            raise
        if not isinstance(body, dict):
            raise BackendError(
                "reply:bad-provider-reply",
                f"expected a JSON object from the provider: {self.hidden.clip(json.dumps(body), 200)}",
                attempts,
            )
        return body, attempts

    def reply(self, body: Any, attempts: int) -> Reply:
        """The provider's reply read as a Reply; an error it ends as carries the tokens the reply cost."""
        try:
            usage = self.usage(body)
        except BackendError as err:  # a count no report can add: the reply is an error whatever else it holds
            err.attempts = attempts
            raise
        try:
            return self.read(body, attempts, usage)
        except BackendError as err:
            err.usage = usage
            raise

    def usage(self, body: Any) -> tuple[int, int] | None:
        """The (input, output) tokens a reply says it cost under USAGE in its `usage`, whatever else it holds;
        BackendError reply:bad-usage for a count that is not a whole number from 0 to 2^53."""
        return spent(body, *self.USAGE, self.hidden)

    def paced_usage(self, body: Any) -> tuple[int, int] | None:
        """The tokens a reply cost, for the pacer's estimates: none from a reply whose counts are bad (an error)."""
        try:
            return self.usage(body)
        except BackendError:
            return None

    def read(self, body: Any, attempts: int, usage: tuple[int, int] | None) -> Reply:
        """The provider's decoded reply as a Reply: its calls, else its text or stated refusal; else an error."""
        raise NotImplementedError

    def tool_call(self, name: Any, args: Any, call_id: str) -> ToolCall:
        """A call in the task file's names; arguments that are not an object make a call that fails, not a crash."""
        if not isinstance(name, str) or not name:
            raise BackendError("reply:bad-provider-reply", f"a tool call without a name: {json.dumps(name)}")
        name = self.names.original(name)
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except (ValueError, RecursionError):
                shown = self.hidden.clip(args, 200)
                return ToolCall(name, {}, f"arguments are not JSON: {shown}", call_id, said=args or None)
        if not isinstance(args, dict):
            shown = self.hidden.clip(json.dumps(args), 200)
            return ToolCall(name, {}, f"arguments are not a JSON object: {shown}", call_id, said=said_in(args))
        if nested_deeper(args, JSON_DEPTH):  # the harness masks, judges and writes them by recursion
            deep = f"arguments nested more than {JSON_DEPTH} levels deep"
            return ToolCall(name, {}, deep, call_id, said=said_in(args))
        return ToolCall(name, args, call_id=call_id)

    def call_id(self, given: Any, prefix: str) -> str:
        """The provider's id for a call, or one of ours when it sent none: a result must name the call it answers."""
        return given if isinstance(given, str) and given else f"{prefix}{next(self._ids)}"


def result_text(result: ToolResult) -> str:
    """A played-back result as the tool message's content: a string as it is, any other JSON value as JSON text."""
    return result.content if isinstance(result.content, str) else json.dumps(result.content, ensure_ascii=False)


def spent(body: Any, given: str, received: str, hidden: Secrets = NO_SECRETS) -> tuple[int, int] | None:
    """The (input, output) tokens a provider's reply says it cost, under these names in its `usage`, whatever else
    the reply holds (a reply that ends as an error cost them too); None unless it says both. Each count it says is
    checked, as backends.tokens checks every backend's."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    said = [key for key in (given, received) if usage.get(key) is not None]
    counts = [token_count(usage[key], f"usage.{key}", hidden) for key in said]
    return (counts[0], counts[1]) if len(counts) == 2 else None


def parameter_hint(message: str, sent: Mapping[str, str]) -> str:
    """` (hint: ...)` for the parameter we sent that an error message names first, or nothing when it names none.

    sent: each parameter the request carried that a setting controls, as the API names it -> what to do about it.
    """
    named = [
        (found.start(), hint)
        for parameter, hint in sent.items()
        if (found := re.search(rf"(?<![\w.]){re.escape(parameter)}(?!\w)", message, re.IGNORECASE))
    ]
    return f" (hint: {min(named)[1]})" if named else ""


def provider_error_text(body: bytes, hidden: Secrets) -> str:
    """`: <the provider's error message>` (both send {"error": {"message": ...}}), else the start of the body."""
    from backends.transport import snippet

    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return snippet(body, hidden)
    return f": {hidden.clip(message, MESSAGE_CHARS)}" if isinstance(message, str) and message else snippet(body, hidden)
