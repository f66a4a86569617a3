"""Tool calls a model wrote as text. A server started without a tool parser (vLLM, llama.cpp, Ollama or TGI with some
chat templates) leaves the model's call in the reply's text, in its chat template's markup; read as text, it would be
a refusal, and pass every refusal task. Every backend's replies pass through here, in the conversation."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from typing import Any

from harness.records import Reply, record, replace
from harness.text import CALL_SIGN, clip, provider_name

CODE = "reply:tool-call-in-text"
FIX = "start the server with a tool parser (vLLM --enable-auto-tool-choice --tool-call-parser ..., llama.cpp --jinja)"
# Markup that chat templates write only around a tool call, each followed by the call in JSON. A call in one of them
# counts whatever tool it names: the markup says it is a call, and a parser would have made it one.
JSON_MARKUPS = ("<tool_call>", "<|tool_call|>", "<|python_tag|>", "[TOOL_CALLS]", "functools[")
FUNCTION_TAG = "<function="  # Llama 3.1's <function=NAME>{...}</function>, Qwen3-Coder's <function=NAME><parameter=...
MISTRAL_TAGS = ("[ARGS]", "[CALL_ID]")  # Mistral's v11 and later templates: [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}
GLM_CALL = re.compile(r"([\w./:-]{1,128})\s*(<arg_key>|</tool_call>)")  # GLM-4.5's <tool_call>NAME<arg_key>...
# Markups that name the tool they call before its arguments: the markup and the pattern whose group 1 is the name.
NAMED_MARKUPS = (
    # DeepSeek V3 and R1: function<｜tool▁sep｜>NAME then a fenced JSON block; V3.1: NAME<｜tool▁sep｜>{...}
    (
        "<\uff5ctool\u2581call\u2581begin\uff5c> markup",
        re.compile(
            r"<\uff5ctool\u2581call\u2581begin\uff5c>(?:function<\uff5ctool\u2581sep\uff5c>)?"
            r"([\w./-]{1,128})\s*(?:<\uff5ctool\u2581sep\uff5c>|```|\{)"
        ),
    ),
    # Kimi K2: <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
    (
        "<|tool_call_begin|> markup",
        re.compile(
            r"<\|tool_call_begin\|>\s*(?:functions\.)?([\w./-]{1,128}?)(?::\d+)?\s*<\|tool_call_argument_begin\|>"
        ),
    ),
    # gpt-oss: harmony's header, <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}
    ("to=functions.NAME markup", re.compile(r"\bto=functions\.([\w./-]{1,128})")),
    # MiniMax-M2, and Claude's old prompted format: <invoke name="NAME"> in the tags that hold the calls
    (
        "<invoke name=...> markup",
        re.compile(r'(?:<minimax:tool_call>|<function_calls>)\s*<invoke name="([\w./:-]{1,128})">'),
    ),
    # Gemma's (and Gemini 2's) block of code to run: ```tool_code then NAME(...), print(NAME(...)), on default_api,
    # several in a list
    (
        "```tool_code markup",
        re.compile(r"```tool_code[ \t]*\r?\n\s*(?:\[\s*)?(?:print\(\s*)?(?:default_api\.)?([A-Za-z_][\w.]{0,127})\("),
    ),
)
# Llama 3.2 and Llama 4's pythonic calls, [NAME(KEY=VALUE, ...), ...], as the whole reply: a call of a tool by name.
PYTHONIC = re.compile(r"\s*(?:<\|python_start\|>)?\s*\[\s*([A-Za-z_][\w.]{0,127})\(")
# JSON values decoded at most in one reply: a decode may read to the end of the text, so this bounds the work on a
# reply of a megabyte full of braces, while a call written where a reply starts or after a little prose is found.
MAX_DECODES = 64
# Characters a decode of JSON found outside a markup reads at most: a value nested 64 deep over a megabyte would be
# read 64 times. A call outside a markup is a call only when this much holds it whole.
BARE_WINDOW = 64 * 1024
NAME = re.compile(r"[\w./:-]{1,128}")  # a tool's name as a markup writes it: longer is not one
NAME_SHOWN = 80
VALUE_START = re.compile(r"[\[{]")
SPACE = re.compile(r"\s*")
FENCE = re.compile(r"```[A-Za-z]*\s*\Z")
FENCE_BEFORE = 24  # characters before a JSON value that may hold the ``` (and its language) opening its block
DECODER = json.JSONDecoder()


@record
class TextCall:
    """A tool call found in a reply's text: the tool, by the task file's name when it is one, and the markup."""

    tool: str
    markup: str
    known: bool = True


def checked(reply: Reply, tools: Collection[str]) -> Reply:
    """The reply; or, when it made no call and its text writes one, the error reply:tool-call-in-text."""
    if reply.error_code is not None or reply.tool_calls or not reply.text:
        return reply
    call = text_call(reply.text, tools)
    if call is None:
        return reply
    unknown = "" if call.known else " (not one of the task file's tools)"
    reason = (
        f"the reply wrote a call of {clip(call.tool, NAME_SHOWN)}{unknown} as text ({call.markup}) instead of "
        f"calling it: {FIX}"
    )
    return replace(reply, refused=False, refused_by_provider=None, error_code=CODE, error=reason)


def text_call(text: str, tools: Collection[str]) -> TextCall | None:
    """The first tool call the text writes in a known markup, or as JSON naming one of the tools; None when none."""
    if CALL_SIGN.search(text) is None:
        return None
    reading = _Reading(text, tools)
    return reading.in_markup() or reading.in_json()


class _Reading:
    """One reply's text, read for calls of the tools, with the JSON values it may still decode."""

    def __init__(self, text: str, tools: Collection[str]) -> None:
        self.text = text
        self.tools = tools
        self.decodes = MAX_DECODES
        self.names: dict[str, str] | None = None  # each tool by its name as written, made when a call names one

    def in_markup(self) -> TextCall | None:
        """The first call written in a chat template's markup, of any tool."""
        for markup in JSON_MARKUPS:
            for start in self.after(markup):
                name = self.markup_call(start, markup)
                if name is not None:
                    return self.named(name, f"{markup.rstrip('[')} markup")
        for start in self.after(FUNCTION_TAG):
            name = self.function_tag(start)
            if name is not None:
                return self.named(name, "<function=...> markup")
        for markup, pattern in NAMED_MARKUPS:
            if (found := pattern.search(self.text)) is not None:
                return self.named(found[1], markup)
        pythonic = PYTHONIC.match(self.text)
        spelled = self.spelled(pythonic[1]) if pythonic else None  # brackets alone say no call: only a tool's name
        return TextCall(spelled, "[NAME(...)] markup") if spelled is not None else None

    def in_json(self) -> TextCall | None:
        """The first JSON value, fenced or bare, that writes a call of one of the tools with its arguments."""
        text, position = self.text, 0
        if '"arguments"' not in text and '"parameters"' not in text:
            return None  # no such call can be written without one of them
        while self.decodes > 0:
            found = VALUE_START.search(text, position)
            if found is None:
                return None
            start = found.start()
            decoded = self.decode(text[start : start + BARE_WINDOW], 0)
            if decoded is None:
                position = start + 1
                continue
            for name, has_args in _calls(decoded[0]):
                if has_args and (spelled := self.spelled(name)) is not None:
                    fenced = FENCE.search(text, max(0, start - FENCE_BEFORE), start) is not None
                    return TextCall(spelled, "a fenced JSON block" if fenced else "bare JSON")
            position = start + decoded[1]
        return None

    def named(self, name: str, markup: str) -> TextCall:
        """A call written in a markup: of a tool by the task file's name, or of one it does not have, as written."""
        spelled = self.spelled(name)
        return TextCall(name, markup, known=False) if spelled is None else TextCall(spelled, markup)

    def spelled(self, name: str) -> str | None:
        """The task file's name for a tool's name as written, as it is or as the providers see it (dots as `_`)."""
        if self.names is None:
            self.names = {provider_name(tool): tool for tool in self.tools}
            self.names.update((tool, tool) for tool in self.tools)
        return self.names.get(name)

    def after(self, markup: str) -> Iterator[int]:
        """Where the text goes on after each time it writes the markup."""
        start = self.text.find(markup)
        while start != -1:
            yield start + len(markup)
            start = self.text.find(markup, start + 1)

    def markup_call(self, start: int, markup: str) -> str | None:
        """The tool a call written after the markup names: in JSON, or as Mistral's NAME[ARGS]{...}."""
        if markup.endswith("["):
            start -= 1  # functools[ opens the list of calls itself
        at = self.skip_space(start)
        if self.text.startswith(("{", "["), at):
            decoded = self.decode(self.text, at) or (self.python_literal(at) if markup == "<tool_call>" else None)
            calls = _calls(decoded[0]) if decoded else iter(())
            return next((name for name, _ in calls if NAME.fullmatch(name)), None)
        if markup == "<tool_call>":
            glm = GLM_CALL.match(self.text, at)
            # Without arguments only a tool's name makes it a call: "<tool_call> tags </tool_call>" is prose.
            return glm[1] if glm and (glm[2] == "<arg_key>" or self.spelled(glm[1])) else None
        return self.mistral_call(at) if markup == "[TOOL_CALLS]" else None

    def mistral_call(self, at: int) -> str | None:
        """The NAME of [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} (the tags between name and arguments optional)."""
        text = self.text
        name = NAME.match(text, at)
        if name is None:
            return None
        end = name.end()
        while (tag := next((tag for tag in MISTRAL_TAGS if text.startswith(tag, end)), None)) is not None:
            end += len(tag)
            while tag == "[CALL_ID]" and end < len(text) and text[end].isalnum():
                end += 1
        decoded = self.decode(text, end) if text.startswith("{", end) else None
        return name.group() if decoded and isinstance(decoded[0], dict) else None

    def function_tag(self, start: int) -> str | None:
        """The NAME of <function=NAME> followed by its arguments: a JSON object, <parameter=...>, or nothing."""
        text = self.text
        name = NAME.match(text, start)
        if name is None or not text.startswith(">", name.end()):
            return None
        at = self.skip_space(name.end() + 1)
        if text.startswith(("<parameter=", "</function>"), at):
            return name.group()
        decoded = self.decode(text, at) if text.startswith("{", at) else None
        return name.group() if decoded and isinstance(decoded[0], dict) else None

    def python_literal(self, at: int) -> tuple[Any, int] | None:
        """The Python literal that runs from `at` to </tool_call> or the end of the text, as Hermes' own prompt writes
        a call (single quotes, True, None), and where it ends; None when it is none or no decode is left."""
        if self.decodes <= 0:
            return None
        self.decodes -= 1
        end = self.text.find("</tool_call>", at, at + BARE_WINDOW)
        end = len(self.text) if end == -1 else end
        if end - at > BARE_WINDOW:
            return None
        import ast  # only a reply that writes such a call pays for it

        try:
            return ast.literal_eval(self.text[at:end].strip()), end
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # not a literal, or too deep
            return None

    def skip_space(self, at: int) -> int:
        space = SPACE.match(self.text, at)
        return space.end() if space else at

    def decode(self, text: str, at: int) -> tuple[Any, int] | None:
        """The JSON value that starts at `at` and where it ends; None when none does or no decode is left."""
        if self.decodes <= 0:
            return None
        self.decodes -= 1
        try:
            return DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):  # not JSON; or nested deeper than the interpreter recurses
            return None


def _calls(value: Any, depth: int = 0) -> Iterator[tuple[str, bool]]:
    """Each call a JSON value writes, (name, whether it gives arguments or parameters): {"name", "arguments"}, a list
    of them, OpenAI's {"function": {...}} or {"tool_calls": [...]}, llama.cpp's {"tool_call": {...}}, Command R's
    {"tool_name", "parameters"}."""
    if depth > 3:
        return
    if isinstance(value, list):
        for item in value:
            yield from _calls(item, depth + 1)
    elif isinstance(value, dict):
        name = value.get("name") or value.get("tool_name")
        if isinstance(name, str) and name:
            yield name, "arguments" in value or "parameters" in value
        for key in ("function", "tool_calls", "tool_call"):
            if isinstance(value.get(key), (dict, list)):
                yield from _calls(value[key], depth + 1)
