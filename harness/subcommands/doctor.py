"""`eval_agent.py doctor`: a few small probes through the run's provider backend, before a run, after a swap.

Each probe is a task of doctor's own, on a tool surface of its own, sent as a run sends a task (harness.conversation),
so that what it finds is what a run would meet: the API answers; a named tool's call comes back structured; a tool
result goes back and is taken; two calls come in one reply; the sampling and reasoning settings as configured are
taken. A line for each: works, a note, or the quirk and the setting that fixes it. The engine imports no backend: the
entrypoint hands doctor the registry.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from harness import textcalls
from harness.conversation import converse
from harness.endpoints import environment_secrets
from harness.flags import Parser
from harness.leaks import Secrets
from harness.records import (
    AgentSurface,
    ConfigError,
    ExpectRefusal,
    ExpectTool,
    ExpectTrajectory,
    Reply,
    Task,
    Tool,
    ToolScript,
    Unreachable,
    record,
    replace,
)
from harness.reporters.console import say
from harness.settings import Setting, Sources, add_settings, refuse_unknown
from harness.text import call_text, clip, count
from harness.verdict import EXIT_GATE_FAILED, EXIT_GATE_MET, UNREACHABLE

Verdict = Literal["works", "note", "quirk", "unreachable", "rate limited"]
SURFACE = AgentSurface(
    tools=(
        Tool(
            "doctor_echo",
            "Returns the text it is given.",
            {
                "type": "object",
                "properties": {"text": {"type": "string", "description": "the text to return"}},
                "required": ["text"],
            },
        ),
        Tool(
            "doctor_add",
            "Adds two whole numbers and returns the sum.",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        ),
    ),
    system="You are being checked by a test harness. Do exactly what the user asks, using the tools when asked.",
)
TOOL_NAMES = frozenset(tool.name for tool in SURFACE.tools)
PLAIN = Task("doctor-plain", "doctor", "Reply with the single word: ready. Do not call any tool.", ExpectRefusal())
# A call, its scripted result played back (the call's own text), and the reply that takes it: at most two requests.
NAMED = Task(
    "doctor-named",
    "doctor",
    'Call the tool doctor_echo with text "ping". When its result comes back, reply with the text it returned.',
    ExpectTool("doctor_echo", ("text",)),
    tool_results={"doctor_echo": ToolScript(({"echo": "text"},))},
    max_steps=2,
)
PARALLEL = Task(
    "doctor-parallel",
    "doctor",
    'Call both tools at once, in this one reply: doctor_echo with text "ping", and doctor_add with a = 2 and b = 3.',
    ExpectTrajectory((ExpectTool("doctor_echo", ("text",)), ExpectTool("doctor_add", ("a", "b"))), "any-order"),
)
TEXT_CALL_FIX = (
    "the server writes tool calls as text: start it with a tool parser (vLLM: --enable-auto-tool-choice "
    "--tool-call-parser NAME; llama.cpp: --jinja; Ollama: a model whose template takes tools); every task that "
    "expects a call fails, and a refusal task cannot tell a call from a refusal"
)
MAX_FIXES = 2  # settings refused in turn and probed again without them: with the 4 probes after, at most 6 requests
MAX_REQUESTS = 6
PROBES = (PLAIN, NAMED, PARALLEL)  # in the order they are sent
PROBE_NAMES = {PLAIN.id: "plain reply", NAMED.id: "named tool call", PARALLEL.id: "parallel calls"}
# A probe the server failed (a 5xx, a timeout, a dropped connection) is sent again after this long, whatever the
# server asked: doctor is a check of a few seconds, and every request of it is one attempt, never held by a 429.
RETRY_WAIT = 1.0
RETRIED = frozenset({"reply:connect", "reply:timeout", "reply:reset"})
HTTP_STATUS = re.compile(r"HTTP (\d{3})\b")
LIMITED = "the provider answered 429: rate limited / out of quota"
LIMITED_FIX = "wait for the limit to reset, or check the key's plan, quota and billing"


@record(kw_only=True)
class Quirk:
    """A request setting a server may refuse: the parameter sent, the setting that controls it, and the fix.

    field: the backend settings' field that sends it; it applies when the field holds `sent` (any value when None).
    fixed: the field's value with the fix applied, or None to leave it out.
    """

    parameter: str
    setting: str
    field: str
    fix: str
    sent: Any = None
    fixed: Any = None

    def applies(self, settings: Any, declared: Sequence[Setting]) -> bool:
        """Whether the backend reads the setting and sends the parameter with these settings."""
        value = getattr(settings, self.field, None)
        return (
            any(s.var == self.setting for s in declared)
            and value is not None
            and (self.sent is None or value == self.sent)
        )

    def named_in(self, reason: str) -> bool:
        """Whether a refusal's reason names the parameter (as a word of its own, not inside another name)."""
        return re.search(rf"(?<![\w.]){re.escape(self.parameter)}(?![\w])", reason, re.IGNORECASE) is not None


# Every quirk of a setting doctor knows, and its fix: the one table.
QUIRKS = (
    Quirk(
        parameter="temperature",
        setting="EVAL_TEMPERATURE",
        field="temperature",
        fix="unset EVAL_TEMPERATURE (and --temperature): the model takes only its own",
    ),
    Quirk(
        parameter="max_tokens",
        setting="EVAL_MAX_TOKENS_FIELD",
        field="max_tokens_field",
        sent="max_tokens",
        fixed="max_completion_tokens",
        fix="set EVAL_MAX_TOKENS_FIELD=max_completion_tokens (or lower EVAL_MAX_TOKENS if it says the number is too "
        "high)",
    ),
    Quirk(
        parameter="max_completion_tokens",
        setting="EVAL_MAX_TOKENS_FIELD",
        field="max_tokens_field",
        sent="max_completion_tokens",
        fixed="max_tokens",
        fix="set EVAL_MAX_TOKENS_FIELD=max_tokens (an older server; or lower EVAL_MAX_TOKENS if it says the number is "
        "too high)",
    ),
    Quirk(
        parameter="reasoning_effort",
        setting="EVAL_REASONING_EFFORT",
        field="reasoning_effort",
        fix="unset EVAL_REASONING_EFFORT (or choose a level the model takes): not a reasoning model, or not that level",
    ),
    Quirk(
        parameter="reasoning",
        setting="EVAL_REASONING_EFFORT",
        field="reasoning_effort",
        fix="unset EVAL_REASONING_EFFORT (or choose a level the model takes): not a reasoning model, or not that level",
    ),
    Quirk(
        parameter="thinking",
        setting="EVAL_THINKING_BUDGET",
        field="thinking_budget",
        fix="unset EVAL_THINKING_BUDGET (or keep it under EVAL_MAX_TOKENS): the model does not think, or not so long",
    ),
    Quirk(
        parameter="budget_tokens",
        setting="EVAL_THINKING_BUDGET",
        field="thinking_budget",
        fix="unset EVAL_THINKING_BUDGET (or keep it under EVAL_MAX_TOKENS): the model does not think, or not so long",
    ),
    # Gemini's names for them (its thinkingConfig), in its messages' words too: "Thinking level is not supported".
    *(
        Quirk(
            parameter=parameter,
            setting="EVAL_THINKING_BUDGET",
            field="thinking_budget",
            fix="unset EVAL_THINKING_BUDGET (or keep it under EVAL_MAX_TOKENS): the model does not think, or not so "
            "long",
        )
        for parameter in ("thinkingBudget", "thinking_budget")
    ),
    *(
        Quirk(
            parameter=parameter,
            setting="EVAL_REASONING_EFFORT",
            field="reasoning_effort",
            fix="unset EVAL_REASONING_EFFORT (or choose a level the model takes): the model takes no thinking level, "
            "or not that one",
        )
        for parameter in ("thinkingLevel", "thinking_level", "thinking")
    ),
)


@record
class Line:
    """What one probe found: works, a note, a quirk (with its fix), or no answer at all."""

    probe: str
    verdict: Verdict
    text: str

    def __str__(self) -> str:
        return f"{self.probe}: {self.verdict}" + (f": {self.text}" if self.text else "")


@record
class Registry:
    """What doctor needs of the backends, which the engine does not import: the setting that names one, the
    backends by name, how a run chooses one, and every setting declared (for masking, and to know a misspelt one)."""

    backend: Setting
    backends: Mapping[str, Any]
    choose: Callable[[Sources], str]
    settings: Sequence[Setting]


def main(argv: Sequence[str], registry: Registry) -> int:
    """Probe the backend a run with these settings would use; a line per probe, then what to do."""
    parser = Parser(
        prog="eval_agent.py doctor",
        description="Send at most six small probes through the provider backend a run with these settings would use "
        "(the run's flags and variables), and say for each what works and which setting fixes what does not.",
        epilog="Exit codes: 0 a run can score, 1 a quirk would make every task fail, 2 bad settings, "
        "3 the provider could not be reached, rejected the key, or answered 429 (rate limited, or out of quota).",
    )
    add_settings(parser, "the backend", {"": (registry.backend,), **backend_settings(registry)})
    sources = Sources(parser.parse_args(argv), os.environ)
    name = registry.choose(sources)
    backend_class = registry.backends[name]
    if getattr(backend_class, "IN_PROCESS", False) or not backend_class.PLAYS_TOOLS:
        raise ConfigError(f"{registry.backend.var}: doctor probes a model behind a provider's API; {refused(name)}")
    settings = backend_class.configure(sources)
    try:
        refuse_unknown(os.environ, frozenset(setting.var for setting in registry.settings), ())
    except ConfigError as exc:  # doctor reads no task file, whose placeholders a variable may be for
        print(f"eval_agent doctor: warning: {exc}", file=sys.stderr)
    checkup = Checkup(backend_class, settings, Secrets(environment_secrets(registry.settings, os.environ)))
    say(checkup.hidden.mask(f"doctor: the {name} backend, {described(checkup.shown)}"))
    try:
        lines = checkup.run()
    finally:
        checkup.backend.transport.close()
    for line in lines:
        say(checkup.hidden.mask(str(line)))
    unreached = [line for line in lines if line.verdict in ("unreachable", "rate limited")]
    if unreached:
        raise Unreachable(checkup.hidden.mask(checkup.unreachable_reason))
    quirks = sum(line.verdict == "quirk" for line in lines)
    if quirks:
        fix = f"fix the quirk{'s' if quirks > 1 else ''} above, then run doctor again"
        say(f"doctor: {fix} ({count(checkup.sent, 'probe')})")
        return EXIT_GATE_FAILED
    say(f"doctor: a run can score ({count(checkup.sent, 'probe')})")
    return EXIT_GATE_MET


def backend_settings(registry: Registry) -> dict[str, Sequence[Setting]]:
    return {name: backend.SETTINGS for name, backend in registry.backends.items()}


def refused(name: str) -> str:
    """Why doctor does not probe this backend, and what to do instead."""
    if name == "stub":
        return "the stub answers from a table in this process: choose a provider backend (openai, anthropic...)"
    return f"the {name} backend's agent runs tools of its own, which doctor cannot offer: try a run of a few tasks"


def described(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in settings.items())


class RateLimited(Exception):
    """A probe the provider answered 429: nothing more is sent."""

    def __init__(self, task: Task, reply: Reply) -> None:
        super().__init__(reply.error)
        self.task = task
        self.reply = reply


class Checkup:
    """The probes, sent one after another through backends made as a run makes them, with the fixes found so far."""

    def __init__(self, backend_class: Any, settings: Any, known: Secrets) -> None:
        self.backend_class = backend_class
        self.settings = settings
        self.known = known
        self.run_id = os.urandom(16).hex()
        self.sent = 0
        self.spent = 0  # requests sent, retries included
        self.unreachable_reason = ""
        self.backend = self.made()
        self.hidden = self.backend.hidden  # the secrets of the environment, and the backend's own
        self.shown = dict(self.backend.describe())

    def made(self) -> Any:
        """A backend made as a run makes it, with these settings and doctor's tool surface, whose every request is one
        attempt: doctor sends a probe again itself, and a 429 is neither waited on nor sent again."""
        backend = self.backend_class(self.settings, SURFACE, self.run_id, hidden=self.known)
        backend.transport.retries = 0
        backend.transport.retry_statuses = backend.transport.retry_statuses - {429}
        return backend

    def ask(self, task: Task) -> list[Reply]:
        """The replies of one probe, step by step, sent as a run sends a task; sent again after a short wait when the
        server failed it, as far as EVAL_RETRIES and the probes after it leave room for in the six requests.
        RateLimited when the provider answered 429."""
        after = sum(requests(probe) for probe in PROBES[PROBES.index(task) + 1 :])
        tries = 0
        while True:
            turns, _ = converse(self.backend, task, TOOL_NAMES)
            replies = [step.reply for turn in turns for step in turn.steps]
            self.spent += sum(reply.attempts for reply in replies)
            last = replies[-1]
            if last.error_code == "reply:rate-limited" or self.status(last) == 429:
                raise RateLimited(task, last)
            room = MAX_REQUESTS - self.spent - after >= requests(task)
            if not (room and tries < self.settings.retries and self.failed_by_server(last)):
                self.sent += len(replies)
                return replies
            tries += 1
            time.sleep(RETRY_WAIT)

    def status(self, reply: Reply) -> int | None:
        """The HTTP status a reply ended in, when it ended in one."""
        found = HTTP_STATUS.match(reply.error or "") if reply.error_code == "reply:http-status" else None
        return int(found[1]) if found else None

    def failed_by_server(self, reply: Reply) -> bool:
        """Whether a run would send the request again: it ended in a status retried, a timeout, no connection."""
        return reply.error_code in RETRIED or self.status(reply) in self.backend.transport.retry_statuses

    def run(self) -> list[Line]:
        """Every probe's line; after a probe that got no answer, none of the rest; after a 429, nothing more."""
        lines: list[Line] = []
        try:
            lines += self.plain()
            if lines[0].verdict != "works":
                return lines
            lines += self.named()
            parallel = self.parallel()
        except RateLimited as limited:
            self.unreachable_reason = f"{LIMITED}: {limited.reply.error}"
            text = f"{LIMITED} ({limited.reply.error}); fix: {LIMITED_FIX}"
            return [*lines, Line(PROBE_NAMES[limited.task.id], "rate limited", text)]
        said = any(line.text == parallel.text for line in lines)  # a quirk the named call showed already
        return [*lines, replace(parallel, text="as above") if said and parallel.verdict == "quirk" else parallel]

    def plain(self) -> list[Line]:
        """The API answers at all, and takes the settings as configured: each one it refuses is probed again without."""
        refused: list[Line] = []
        while True:
            reply = self.ask(PLAIN)[0]
            if reply.error_code is None:
                taken = [quirk.parameter for quirk in self.quirks()]
                said = f"the server takes {', '.join(taken)}" if taken else "no sampling or reasoning setting is sent"
                return [Line("plain reply", "works", ""), *(refused or [Line("settings", "works", said)])]
            if reply.error_code in UNREACHABLE:
                self.unreachable_reason = reply.error or reply.error_code
                return [Line("plain reply", "unreachable", f"{self.unreachable_reason}; fix: {self.reach_fix(reply)}")]
            quirk = next((q for q in self.quirks() if q.named_in(reply.error or "")), None)
            if quirk is None or reply.error_code != "reply:http-status":
                return [Line("plain reply", "quirk", failed(reply)), *refused]
            again = len(refused) < MAX_FIXES
            then = "; the probes below ran without it" if again else "; doctor stops here: run it again with the fix"
            refused.append(
                Line(
                    "settings", "quirk", f"the server refuses {quirk.parameter} ({reply.error}); fix: {quirk.fix}{then}"
                )
            )
            if not again:
                return [Line("plain reply", "quirk", "refused for its settings (below)"), *refused]
            self.settings = replace(self.settings, **{quirk.field: quirk.fixed})
            self.backend.transport.close()
            self.backend = self.made()

    def quirks(self) -> list[Quirk]:
        """The quirks that can apply: the parameters these settings send, of the settings this backend reads."""
        return [quirk for quirk in QUIRKS if quirk.applies(self.settings, self.backend_class.SETTINGS)]

    def reach_fix(self, reply: Reply) -> str:
        """The variable to check when the provider did not answer: the key it rejected, or where it is."""
        if reply.error_code in ("reply:auth", "reply:key-rejected"):
            key = getattr(self.settings, "key_variable", None) or "the API key variable"
            return f"set {key} to a key this server takes"
        base_url = getattr(self.backend_class, "BASE_URL", None)
        return f"check {base_url.var if base_url is not None else 'the base URL'} and that the server is up"

    def named(self) -> list[Line]:
        """A call of a named tool comes back structured, with its argument; its result goes back and is taken."""
        replies = self.ask(NAMED)
        call_line = calls_line("named tool call", replies[0], wanted=1)
        if call_line.verdict != "works":
            return [call_line, Line("tool result round trip", "note", "not probed: no call to answer")]
        if len(replies) < 2:
            return [call_line, Line("tool result round trip", "note", "not probed: the backend sent no second step")]
        second = replies[1]
        if second.error_code is not None:
            reason = f"{second.error_code}: {second.error}"
            text = (
                f"the server refused the call sent back with its result ({reason}): every task with scripted tool "
                "results fails; no setting fixes it (the backend must send back what the server sent)"
            )
            return [call_line, Line("tool result round trip", "quirk", text)]
        return [call_line, Line("tool result round trip", "works", "the result went back and the model took it")]

    def parallel(self) -> Line:
        """Two calls in one reply, where the model makes them so."""
        return calls_line("parallel calls", self.ask(PARALLEL)[0], wanted=2)


def requests(task: Task) -> int:
    """The requests a probe sends when none is retried."""
    return task.max_steps if task.is_conversation else 1


def calls_line(probe: str, reply: Reply, wanted: int) -> Line:
    """What a reply asked for `wanted` structured calls says of the server: they came, or the quirk."""
    if reply.error_code == textcalls.CODE:
        return Line(probe, "quirk", TEXT_CALL_FIX)
    if reply.error_code is not None:
        return Line(probe, "quirk", failed(reply))
    calls = reply.tool_calls
    unreadable = next((call for call in calls if call.args_error), None)
    if unreadable is not None:
        return Line(probe, "quirk", f"the call's arguments could not be read: {unreadable.args_error}")
    required = {tool.name: tool.input_schema.get("required", ()) for tool in SURFACE.tools}
    missing = [(call.name, key) for call in calls for key in required.get(call.name, ()) if key not in call.args]
    if missing:
        name, key = missing[0]
        return Line(probe, "quirk", f"{name} came without its required argument {key}: every call would fail its task")
    shown = clip(", ".join(call_text(call.name, call.args, values=True) for call in calls), 200)
    if wanted > 1 and len(calls) == 1:
        return Line(
            probe, "note", "one call per reply: tasks that expect parallel calls will need more steps (maxSteps)"
        )
    if not calls:
        said = clip(reply.text or "", 80)
        if wanted > 1:
            return Line(probe, "note", f"no call, only text ({said!r}): the model would not make two at once")
        text = f"no call, only text ({said!r}): tasks that expect a call will fail; choose a model that calls tools"
        return Line(probe, "quirk", text)
    return Line(probe, "works", shown)


def failed(reply: Reply) -> str:
    """A probe's error, as the backend says it (with its hint where it has one): every task would end so."""
    return f"{reply.error_code}: {reply.error}; every task would end so"
