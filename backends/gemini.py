"""The gemini backend: the Gemini API's generateContent with function declarations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from backends.options import (
    GEMINI,
    GEMINI_API_KEY,
    GEMINI_BASE_URL,
    GEMINI_THINKING_BUDGET,
    GOOGLE_API_KEY,
    MAX_TOKENS,
    MODEL,
    REASONING_EFFORT,
    TEMPERATURE,
    THINKING_BUDGET,
)
from backends.provider import MESSAGE_CHARS, ProviderBackend, ProviderSettings
from backends.tokens import token_count
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
    replace,
)
from harness.settings import Sources
from harness.text import blank

INTERNAL = 500  # Gemini's own advice: retry a 500 INTERNAL as a 503
# What Gemini stopped for when it filtered the reply: a refusal the provider stated, when no call was made.
FILTERED = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"})
# What Gemini stopped for when the model's calls could not be read: an error, whatever else the reply holds.
BAD_CALLS = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
# Cut off before any call: by the token limit, or withheld as a recitation of its training data (no refusal).
CUT_OFF = frozenset({"MAX_TOKENS", "RECITATION"})
# The one finishReason of a reply that ended as the model meant it to; any other (OTHER, LANGUAGE, TOO_MANY_TOOL_CALLS,
# MISSING_THOUGHT_SIGNATURE...) stopped it, and its text so far is no refusal.
COMPLETE = "STOP"
OUTPUT_COUNTS = ("candidatesTokenCount", "thoughtsTokenCount")  # what usageMetadata counts as output, summed


class GeminiBackend(ProviderBackend):
    """POST {base}/v1beta/models/{model}:generateContent: the system prompt as `systemInstruction`, the tools as
    function declarations, each call's result sent back as a functionResponse part."""

    NAME = "gemini"
    BASE_URL = GEMINI_BASE_URL
    API_KEY = GOOGLE_API_KEY
    GEMINI_API_KEY = GEMINI_API_KEY
    THINKING_BUDGET = GEMINI_THINKING_BUDGET
    SETTINGS = GEMINI
    RETRIED_TOO = frozenset({INTERNAL})
    TOOL_KEYS = ("tools", "toolConfig")

    @classmethod
    def configure(cls, sources: Sources) -> ProviderSettings:
        """The providers' settings, the key from either variable, and how hard the model thinks."""
        settings = super().configure(sources)
        if settings.key is None and sources.given(cls.GEMINI_API_KEY):
            settings = replace(settings, key=sources.get(cls.GEMINI_API_KEY), key_variable=cls.GEMINI_API_KEY.var)
        model_path(settings.model, sources.text(MODEL)[1])  # a name it cannot send is bad input, before any request
        effort, effort_where = sources.text(REASONING_EFFORT)
        budget, budget_where = sources.text(cls.THINKING_BUDGET)
        if effort is not None and budget is not None:
            raise ConfigError(f"{effort_where}, {budget_where}: Gemini takes a thinking level or a budget, not both")
        if sources.get(REASONING_EFFORT) == "none":
            raise ConfigError(
                f"{effort_where}: Gemini has no thinking level none (minimal, low, medium, high or xhigh); "
                f"a model that can think less takes {THINKING_BUDGET.var}"
            )
        return settings

    @classmethod
    def schema_notes(cls, tools: Sequence[Tool]) -> list[str]:
        """What of each tool's inputSchema is not sent to Gemini, one line per keyword."""
        from backends.gemini_schema import gemini_schema  # made for validate and a run on Gemini: not every run

        return [
            f"{tool.name}: inputSchema{where} is not sent (Gemini's function parameters do not take it)"
            for tool in tools
            for where in gemini_schema(tool.name, tool.input_schema)[1]
        ]

    def __init__(
        self, settings: ProviderSettings, surface: AgentSurface, run_id: str, hidden: Secrets = NO_SECRETS
    ) -> None:
        url = f"{settings.url.rstrip('/')}/v1beta/{model_path(settings.model, MODEL.var)}:generateContent"
        super().__init__(settings, surface, url, {"x-goog-api-key": settings.key} if settings.key else {}, hidden)
        self.transport.error_text = gemini_error_text
        generation: dict[str, Any] = {"maxOutputTokens": settings.max_tokens}
        if settings.temperature is not None:
            generation["temperature"] = settings.temperature
        if settings.thinking_budget is not None:
            generation["thinkingConfig"] = {"thinkingBudget": settings.thinking_budget}
        elif settings.reasoning_effort is not None:
            generation["thinkingConfig"] = {"thinkingLevel": settings.reasoning_effort.upper()}
        self.request_base: dict[str, Any] = {"generationConfig": generation}
        if surface.system:
            self.request_base["systemInstruction"] = {"parts": [{"text": surface.system}]}
        self.tool_entries = {tool.name: self._declaration(tool) for tool in surface.tools}
        if surface.tools:
            self.request_base["tools"] = self.tools_field(list(self.tool_entries.values()))
            self.request_base["toolConfig"] = {"functionCallingConfig": {"mode": "AUTO"}}
        self.hints = dict.fromkeys(("maxOutputTokens", "max_output_tokens"), f"lower {MAX_TOKENS.var}")
        if settings.temperature is not None:
            self.hints["temperature"] = f"unset {TEMPERATURE.var}; this model takes no temperature"
        if "thinkingConfig" in generation:
            thinking = f"unset {THINKING_BUDGET.var} or {REASONING_EFFORT.var}, or choose what this model takes"
            names = ("thinking", "thinking_budget", "thinkingBudget", "thinking_level", "thinkingLevel")
            self.hints |= dict.fromkeys(names, thinking)

    def _declaration(self, tool: Tool) -> dict[str, Any]:
        declaration: dict[str, Any] = {"name": self.names.provider(tool.name)}
        if tool.description:
            declaration["description"] = tool.description
        from backends.gemini_schema import gemini_schema

        parameters = gemini_schema(tool.name, tool.input_schema)[0]
        if parameters.get("properties") or parameters.get("type") not in ("OBJECT", None):
            declaration["parameters"] = parameters  # Gemini refuses an object without properties: none is sent
        return declaration

    def tools_field(self, entries: list[Any]) -> Any:
        """Gemini's `tools`: one Tool object holding every function declaration."""
        return [{"functionDeclarations": entries}]

    def describe(self) -> dict[str, Any]:
        """The providers' settings, and the thinking level asked for under Gemini's name for it."""
        settings = super().describe()
        if self.settings.reasoning_effort is not None:
            settings["thinkingLevel"] = self.settings.reasoning_effort
        return settings

    def run(self, request: AgentRequest) -> Reply:
        """One generateContent for the conversation so far; its function calls mapped back to the task file's names."""
        contents: list[Any] = []
        for turn in (*request.history, Turn(request.prompt, request.steps)):
            contents.append({"role": "user", "parts": [{"text": turn.user}]})
            for step in turn.steps:
                if step.reply.native is not None:
                    contents.append(step.reply.native)
                if step.results:  # one user turn answers every call of the one before, in call order
                    calls = [part["functionCall"] for part in step.reply.native["parts"] if "functionCall" in part]
                    parts = [_function_response(call, result) for call, result in zip(calls, step.results, strict=True)]
                    contents.append({"role": "user", "parts": parts})
        return self.reply(*self.post(self.offering({**self.request_base, "contents": contents}, request)))

    def usage(self, body: Any) -> tuple[int, int] | None:
        """(input, output) tokens from usageMetadata, each count checked: the model's thoughts count as output."""
        metadata = body.get("usageMetadata")
        if not isinstance(metadata, dict) or metadata.get("promptTokenCount") is None:
            return None
        given = token_count(metadata["promptTokenCount"], "usageMetadata.promptTokenCount", self.hidden)
        output = sum(
            token_count(metadata[key], f"usageMetadata.{key}", self.hidden)
            for key in OUTPUT_COUNTS
            if metadata.get(key) is not None
        )
        return given, token_count(output, "usageMetadata." + " + ".join(OUTPUT_COUNTS), self.hidden)

    def read(self, body: Any, attempts: int, usage: tuple[int, int] | None) -> Reply:
        """The first candidate as a Reply: its calls, else its text or stated refusal; cut off or blank, an error."""
        candidates = body.get("candidates")
        if not candidates:
            feedback = body.get("promptFeedback")
            blocked = feedback.get("blockReason") if isinstance(feedback, dict) else None
            if isinstance(blocked, str) and blocked:
                reason = f"blockReason: {self.hidden.clip(blocked, 80)}"
                return Reply(refused=True, refused_by_provider=reason, attempts=attempts, usage=usage)
            raise BackendError("reply:bad-provider-reply", "no candidates, and no blockReason", attempts)
        try:
            candidate = candidates[0]
            content = candidate.get("content") or {}
            parts = content.get("parts") or []
            raw_calls = [
                (part["functionCall"]["name"], part["functionCall"].get("args"), part["functionCall"].get("id"))
                for part in parts
                if "functionCall" in part
            ]
            texts = [part["text"] for part in parts if isinstance(part.get("text"), str) and not part.get("thought")]
            # A call under another spelling (a gateway that wrote the SDK's snake_case) is a call all the same: read
            # as text beside it, it would pass a refusal task.
            misspelled = next((key for part in parts for key in part if _misspelled_call(key)), None)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            reason = f"not a generateContent response: no {exc}"
            raise BackendError("reply:bad-provider-reply", reason, attempts) from None
        if misspelled is not None:
            reason = f"a part holds a call under {misspelled}, which the Gemini API spells functionCall"
            raise BackendError("reply:bad-provider-reply", reason, attempts)
        if any("executableCode" in part for part in parts):  # a tool's call too: read as text, it would be a refusal
            reason = "a part holds executableCode: code the model ran with a tool the harness did not offer"
            raise BackendError("reply:bad-provider-reply", f"{reason} (code execution)", attempts)
        finish = candidate.get("finishReason")
        finish = finish if isinstance(finish, str) else None  # a list or an object is no reason, and is unhashable
        if finish in BAD_CALLS:
            said = candidate.get("finishMessage")
            detail = f": {self.hidden.clip(said, 200)}" if isinstance(said, str) and said else ""
            reason = f"the model's function call could not be used (finishReason {finish}){detail}"
            raise BackendError("reply:bad-provider-reply", reason, attempts)
        # A call's args is optional: a tool without parameters is called without it.
        calls = [
            self.tool_call(name, {} if args is None else args, self.call_id(given, "gemini_h"))
            for name, args, given in raw_calls
        ]
        text = "\n".join(texts) or None
        if not calls and finish in CUT_OFF:
            reason = f"the reply was cut off (finishReason {finish}) before any function call"
            raise BackendError("reply:truncated", reason, attempts)
        stated = finish if not calls and finish in FILTERED else None
        if not calls and stated is None and finish not in (None, COMPLETE):
            reason = f"the reply stopped (finishReason {self.hidden.clip(finish, 80)}) before any function call"
            raise BackendError("reply:provider-error", reason, attempts)
        if not calls and blank(text) and stated is None:
            raise BackendError("reply:empty", "a blank reply: no function call, no text", attempts)
        return Reply(
            tool_calls=tuple(calls),
            refused=not calls,
            text=text,
            attempts=attempts,
            usage=usage,
            refused_by_provider=stated,
            native=content if parts else None,  # sent back as it came: Gemini checks each part's thoughtSignature
        )


def _misspelled_call(key: str) -> bool:
    """Whether a part's key names a function call but is not functionCall (function_call, FunctionCall...)."""
    return key != "functionCall" and key.replace("_", "").lower() == "functioncall"


def _function_response(call: dict[str, Any], result: ToolResult) -> dict[str, Any]:
    """A functionResponse part answering its call by name, and by id when Gemini gave the call one.

    Its response must be an object: any other result is wrapped as {"result": ...}; an unscripted tool answers
    {"error": ...}.
    """
    content = result.content
    response = (
        {"error": content} if not result.answered else content if isinstance(content, dict) else {"result": content}
    )
    answer: dict[str, Any] = {"name": call.get("name"), "response": response}
    if call.get("id"):
        answer["id"] = call["id"]
    return {"functionResponse": answer}


def model_path(model: str, where: str) -> str:
    """The model's resource path: models/NAME (as a bare name is read), or tunedModels/NAME for a tuned model."""
    collection, name = ("models", model)
    for prefix in ("models/", "tunedModels/"):
        if model.startswith(prefix):
            collection, name = prefix[:-1], model[len(prefix) :]
    if not name:
        raise ConfigError(f"{where}: expected a model's name after {collection}/, got {model!r}")
    return f"{collection}/{quote(name, safe='')}"


def gemini_error_text(body: bytes, hidden: Secrets) -> str:
    """`: <message> (<status>, <reason>...)`: Gemini's {"error": {"message", "status", "details": [{"reason"}]}}."""
    from backends.transport import snippet

    try:
        error = json.loads(body)["error"]
        message = error["message"]
    except (ValueError, KeyError, TypeError):
        return snippet(body, hidden)
    if not isinstance(message, str) or not message:
        return snippet(body, hidden)
    details = error.get("details") if isinstance(error.get("details"), list) else []
    reasons = [detail.get("reason") for detail in details if isinstance(detail, dict)]
    named = [name for name in (error.get("status"), *reasons) if isinstance(name, str) and name]
    shown = ", ".join(hidden.clip(name, 80) for name in named)
    return f": {hidden.clip(message, MESSAGE_CHARS)}" + (f" ({shown})" if named else "")
