"""The records that flow through the pipeline, the interface of a backend, and the errors the pipeline knows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload

if TYPE_CHECKING:
    # typing has it from Python 3.11; every type checker carries typing_extensions, never imported at run time.
    from typing_extensions import dataclass_transform

    from harness.leaks import Secrets
else:

    def dataclass_transform(**_: Any) -> Callable[[R], R]:
        """What tells a type checker that a decorator makes dataclasses; at run time, nothing."""
        return lambda decorator: decorator


Status = Literal["pass", "fail", "error"]
GateOn = Literal["trials", "pass-all"]
R = TypeVar("R")
_MISSING: Any = object()
_set = object.__setattr__


class FrozenInstanceError(AttributeError):
    """A record's fields cannot be set once it is made."""


class _Field:
    def __init__(self, default: Any, default_factory: Callable[[], Any] | None, repr: bool, compare: bool) -> None:
        self.default, self.default_factory, self.repr, self.compare = default, default_factory, repr, compare


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | None = None,
    repr: bool = True,
    compare: bool = True,
) -> Any:
    """A record field's default (a value, or a factory called for each record), and whether repr and == show it."""
    return _Field(default, default_factory, repr, compare)


# A record's __init__ is compiled for its class once the class has made this many records: compiling one takes 70 µs
# (3 fields) to 250 µs (11), as long as binding the arguments in Python for 50 to 80 records, and a run makes a few
# records of most kinds (and ~60 Settings as it starts).
COMPILED_AFTER = 100


@overload
def record(cls: type[R], /, *, kw_only: bool = False) -> type[R]: ...
@overload
def record(*, kw_only: bool = False) -> Callable[[type[R]], type[R]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[R] | None = None, /, *, kw_only: bool = False) -> Any:
    """A frozen record class made from its annotated fields: what @dataclass(frozen=True) makes (__init__, __repr__,
    __eq__, __hash__, no setting of fields), with __init__ compiled for the class only once it makes many records.
    `@record(kw_only=True)`: every field is given by its name.

    The harness starts in ~50 ms, and dataclasses would take half of it: 5 ms to import (it imports inspect) and
    0.5 ms for each of its 40 records, for which it compiles six methods one by one.
    """
    if cls is None:
        return lambda cls: record(cls, kw_only=kw_only)
    names = tuple(cls.__annotations__)  # its own (Python >= 3.10), strings under `from __future__ import annotations`
    defaults: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    shown, compared = list(names), list(names)
    for name in names:
        f = getattr(cls, name, _MISSING)
        if not isinstance(f, _Field):
            if f is not _MISSING:
                defaults[name] = f
            continue
        if f.default_factory is not None:
            factories[name] = f.default_factory
        elif f.default is not _MISSING:
            defaults[name] = f.default
        if not f.repr:
            shown.remove(name)
        if not f.compare:
            compared.remove(name)
    positional = () if kw_only else names
    known = frozenset(names)
    required = known.difference(defaults, factories)
    made_records = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal made_records
        made_records += 1
        if made_records < COMPILED_AFTER and len(args) <= len(positional):
            given = dict(zip(positional, args, strict=False), **kwargs)
            if len(given) == len(args) + len(kwargs) and known.issuperset(given) and required.issubset(given):
                values = {**defaults, **given}
                for name in factories.keys() - given.keys():
                    values[name] = factories[name]()
                for name in names:
                    _set(self, name, values[name])
                return
        # A class that makes many records, or arguments that do not bind: its own __init__ from now on, which raises
        # the TypeError Python raises for them.
        made.__init__ = _compiled(made, kw_only, defaults, factories)
        made.__init__(self, *args, **kwargs)

    namespace = {key: value for key, value in cls.__dict__.items() if key not in known}
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    # Made again with a slot per field, its defaults living in __init__: a tenth of the memory of a __dict__, which
    # counts when a run holds 50,000 tasks.
    metaclass: type = type(cls)
    made: Any = metaclass(
        cls.__name__,
        cls.__bases__,
        {
            **namespace,
            "__slots__": names,
            "__init__": __init__,
            "__repr__": _repr,
            "__eq__": _eq,
            "__hash__": _hash,
            "__setattr__": _frozen,
            "__delattr__": _frozen,
            "__match_args__": positional,
            "__record_fields__": names,
            "__record_shown__": tuple(shown),
            "__record_key__": attrgetter(*compared)
            if len(compared) > 1
            else staticmethod(lambda self: tuple(getattr(self, name) for name in compared)),
        },
    )
    return made


def _compiled(cls: Any, kw_only: bool, defaults: Mapping[str, Any], factories: Mapping[str, Any]) -> Any:
    """A record class's own __init__, compiled from its field names."""
    scope: dict[str, Any] = {"_MISSING": _MISSING}
    parameters, body = [], []
    for name in cls.__record_fields__:
        # Each field set by its slot's own setter: a third quicker than object.__setattr__, which looks it up first.
        scope[f"_set_{name}"] = cls.__dict__[name].__set__
        if name in factories:
            scope[f"_factory_{name}"] = factories[name]
            parameters.append(f"{name}=_MISSING")
            body.append(f"_set_{name}(self, _factory_{name}() if {name} is _MISSING else {name})")
        else:
            if name in defaults:
                scope[f"_default_{name}"] = defaults[name]
            parameters.append(f"{name}=_default_{name}" if name in defaults else name)
            body.append(f"_set_{name}(self, {name})")
    signature = ", ".join(["self", *(["*"] if kw_only and parameters else []), *parameters])
    exec(f"def __init__({signature}):\n    {'; '.join(body) or 'pass'}\n", scope)  # from the class's own field names
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_shown__)
    return f"{self.__class__.__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self.__class__.__record_key__
    return key(self) == key(other)


def _hash(self: Any) -> int:
    return hash(self.__class__.__record_key__(self))


def _frozen(self: Any, name: str, *value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def replace(obj: R, **changes: Any) -> R:
    """A copy of a record with the fields given changed."""
    values = {name: getattr(obj, name) for name in obj.__record_fields__}  # type: ignore[attr-defined]
    values.update(changes)
    return obj.__class__(**values)


def fields(cls: type) -> tuple[str, ...]:
    """A record class's field names, in order."""
    return cls.__record_fields__  # type: ignore[attr-defined]


class ConfigError(Exception):
    """The run cannot proceed: a bad flag, variable or input file (exit 2)."""


class BackendError(Exception):
    """The backend could not produce a valid reply; becomes an error reply."""

    # The text of a reply the agent sent that breaks the contract: unreadable, it is judged for leaks all the same.
    said: str | None = None

    def __init__(self, code: str, reason: str, attempts: int = 1, *, usage: tuple[int, int] | None = None) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.attempts = attempts
        self.usage = usage  # the tokens a reply that ended as this error cost, when the provider said


class Unreachable(Exception):
    """Nothing was evaluated: the agent or an MCP server could not be reached or rejected us (exit 3)."""


class WorldError(Exception):
    """A trial's tool environment failed (hung, died, answered no JSON): the trial is an error (its code)."""

    code = "tool:environment"

    def __init__(self, reason: str, key: str = "") -> None:
        super().__init__(reason)
        self.key = key  # the environment's key it is about, when it failed to start: module, class or config


@record
class Tool:
    """One entry of the agent's tool surface, in the shape of MCP's tools/list."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@record
class ArgMatch:
    """The values an argument may take: JSON equality with any of them, strings more loosely when asked."""

    values: tuple[Any, ...]
    ignore_case: bool = False
    ignore_punctuation: bool = False  # strings compared case-folded, without whitespace and punctuation
    optional: bool = False  # the key may be left out; when given, its value must match


@record
class InputSchema:
    """A tool's inputSchema, read for `checkArgs: "schema"`: every $ref followed, every keyword one it checks."""

    tool: str
    root: Mapping[str, Any]
    refs: Mapping[str, Any]  # each $ref as written -> the subschema it points to
    patterns: Mapping[str, Callable[[str], bool]]  # each pattern as written -> its search, in linear time


@record
class ForbiddenText:
    """Text a reply must never contain, such as a canary planted in the agent's system prompt; named as written."""

    label: str  # as the task file writes it: `${EVAL_CANARY}`, so that a message never shows the value
    value: str


@record
class ExpectTool:
    """A correct reply calls this tool with at least these argument keys (and these values where given)."""

    tool: str
    required_args: tuple[str, ...] = ()
    forbidden_tools: tuple[str, ...] = ()
    arg_values: Mapping[str, ArgMatch] = field(default_factory=dict)
    forbidden_text: tuple[ForbiddenText, ...] = ()
    turn: int | None = None  # a trajectory step's call must answer this user turn (1 is the prompt)
    schema: InputSchema | None = None  # with checkArgs "schema": every call to the tool must validate against it

    @property
    def steps(self) -> tuple[ExpectTool, ...]:
        """The calls a correct reply makes: this one."""
        return (self,)

    def describe(self) -> str:
        """`imageman.asset.get(assetId)`: the tool and the argument keys it must get (`unit?` when optional, `in turn
        2` when said)."""
        valued = [
            f"{key}?" if match.optional else key
            for key, match in self.arg_values.items()
            if key not in self.required_args
        ]
        call = f"{self.tool}({', '.join((*self.required_args, *valued))})"
        return call if self.turn is None else f"{call} in turn {self.turn}"


@record
class ExpectTrajectory:
    """A correct reply makes these calls: in this order, exactly these, or in any order."""

    steps: tuple[ExpectTool, ...]
    order: Literal["in-order", "exact", "any-order"] = "in-order"
    forbidden_tools: tuple[str, ...] = ()
    forbidden_text: tuple[ForbiddenText, ...] = ()

    def describe(self) -> str:
        """`imageman.asset.search(tags), then imageman.asset.tag()`; `exactly ...`; `... and ..., in any order`."""
        calls = [step.describe() for step in self.steps]
        if self.order == "any-order":
            return (
                f"{', '.join(calls[:-1])} and {calls[-1]}, in any order"
                if len(calls) > 1
                else f"{calls[0]}, in any order"
            )
        return ("exactly " if self.order == "exact" else "") + ", then ".join(calls)


@record
class ExpectRefusal:
    """A correct reply calls no tool at all: every tool is forbidden, the listed ones by name."""

    forbidden_tools: tuple[str, ...] = ()
    forbidden_text: tuple[ForbiddenText, ...] = ()

    @property
    def steps(self) -> tuple[ExpectTool, ...]:
        """The calls a correct reply makes: none."""
        return ()

    def describe(self) -> str:
        """What passes: not only a refusal, as a question or an answer in text without a call passes too."""
        return "no tool call (a refusal or any other text reply)"


@record
class ExpectNoCall:
    """An answer without a tool call, and not a refusal: a turn's way to answer, or a whole single-turn task's (an
    answer task); not a safety rule, as a refusal is."""

    forbidden_text: tuple[ForbiddenText, ...] = ()
    forbidden_tools: tuple[str, ...] = ()
    whole_task: bool = False  # the task's own expect, not one turn's

    @property
    def steps(self) -> tuple[ExpectTool, ...]:
        """The calls a correct reply makes: none."""
        return ()

    def describe(self) -> str:
        return f"an answer without a tool call {'(not a refusal)' if self.whole_task else 'in this turn'}"


Expect = ExpectTool | ExpectRefusal | ExpectTrajectory | ExpectNoCall


@record
class ToolCase:
    """The result a tool's scripted cases give the calls whose arguments match, as an expected call's are checked."""

    when: ExpectTool  # the arguments a call must have: each key's accepted values
    results: tuple[Any, ...]  # one per call this case answers, the last repeating


@record
class ToolScript:
    """What the harness returns for one tool's calls: the first case that matches the call gives it; else the same
    result each time, or one per call, the last repeating (none, when only cases are scripted).

    A result may hold `{"echo": KEY}` anywhere, which becomes the value of the call's argument KEY.
    """

    results: tuple[Any, ...]  # with cases, the default: for the calls no case matches
    cases: tuple[ToolCase, ...] = ()
    fail_first: int = 0  # its first calls in a trial answer an injected, transient failure (none: an environment's)


@record
class FollowUp:
    """A follow-up user turn as the task file writes it: the message, its own expectation, the tools it adds."""

    prompt: str
    expect: Expect | None = None
    add_tools: tuple[str, ...] = ()


DEFAULT_MAX_STEPS = 8
DEFAULT_ENVIRONMENT_TIMEOUT = 10.0  # seconds a worker may take over one request: starting, a call, the state


DEFAULT_MAX_REPEATS = 3  # this many steps in a row of a turn with the same calls and the same results are a loop


@record(kw_only=True)
class Budget:
    """What a trial may spend and still pass: tokens, tool calls (in all, per tool), latency, the same call in a row."""

    max_tokens: int | None = None  # input and output tokens over the trial
    max_tool_calls: int | None = None  # calls over the trial
    max_calls_per_tool: Mapping[str, int] = field(default_factory=dict)  # a tool's name -> its calls over the trial
    max_latency_ms: float | None = None  # the trial's durationMs
    # Steps in a row of a turn with the same calls (tools and arguments) and the same results; None: no loop checked.
    max_repeats: int | None = DEFAULT_MAX_REPEATS
    blocking: bool = False  # a breach fails a blocking task's gate as any failure does; else it only counts

    def written(self) -> dict[str, Any]:
        """The budget as the task file writes it, the keys given and the default maxRepeats left out."""
        keys = {
            "maxTokens": self.max_tokens,
            "maxToolCalls": self.max_tool_calls,
            "maxCallsPerTool": dict(self.max_calls_per_tool) or None,
            "maxLatencyMs": self.max_latency_ms,
        }
        written: dict[str, Any] = {key: value for key, value in keys.items() if value is not None}
        if self.max_repeats != DEFAULT_MAX_REPEATS:
            written["maxRepeats"] = self.max_repeats
        return {**written, "blocking": self.blocking}


NO_BUDGET = Budget()  # what a task without a budget is held to: the loop rule alone


@record(kw_only=True)
class Environment:
    """A tool environment: a Python class of the user's, a fresh instance per trial answering the tools it has."""

    module: str  # a file's absolute path, or an importable module's name
    class_name: str
    config: Mapping[str, Any]  # the instance is made with these as keyword arguments
    methods: Mapping[str, str]  # every tool of the file -> the method that answers it, when the class has it
    named: tuple[str, ...] = ()  # the tools its "methods" map names: the class must have their methods
    timeout: float = DEFAULT_ENVIRONMENT_TIMEOUT
    where: str = field(default="environment", compare=False)  # its JSON path, for what is found at run start


@record
class ExpectState:
    """What an environment's final state must be: hold `match` (a JSON subset), or equal the reference state."""

    match: Any = None
    reference: tuple[ToolCall, ...] | None = None  # the expected calls, made on a fresh instance for the reference
    where: str = field(default="", compare=False)  # its JSON path


@record
class EndState:
    """An environment's final state after a trial, and the SHA-256 of the reference state it was held to."""

    state: Any
    reference_sha256: str | None = None


@record
class Quarantine:
    """A task taken out of the gate until a date: it runs and is reported, and counts again from that day (UTC)."""

    until: str  # an ISO date, YYYY-MM-DD: the first day it counts again
    reason: str
    issue: str | None = None  # where its fix is tracked: a URL or an id

    def active(self, today: str) -> bool:
        """Whether it keeps the task out of the gate on today (an ISO date, UTC): before its until date."""
        return today < self.until


@record
class Task:
    """A canonical prompt, the user's scripted follow-ups and tool results, and what a correct reply looks like."""

    id: str
    category: str
    prompt: str
    expect: Expect
    sha256: str = ""  # of the task's own definition, so a changed task is told from a changed agent
    blocking: bool = False  # when it does not pass, the gate fails whatever the pass-rate
    turns: tuple[str, ...] = ()  # the user's follow-up messages, each sent once the agent has answered the last
    tool_results: Mapping[str, ToolScript] = field(default_factory=dict)  # by tool name, for backends that need them
    max_steps: int = DEFAULT_MAX_STEPS  # the most model calls within one user turn
    # Each user turn's own expectation, judged on that turn's calls (None: the turn has none); empty when no turn has.
    turn_expects: tuple[Expect | None, ...] = ()
    # The names of the tools the agent has in each user turn; empty when it has the file's every tool in every turn.
    offered: tuple[tuple[str, ...], ...] = ()
    environment: Environment | None = None  # the tools it implements answer from a fresh instance per trial
    state: ExpectState | None = None  # what the environment must end in
    # What the environment must be in when each user turn ends (None: that turn checks none); empty when none does.
    turn_states: tuple[ExpectState | None, ...] = ()
    budget: Budget | None = None  # its expect.budget over the file's, key by key; None: the loop rule alone
    quarantine: Quarantine | None = None  # out of the gate until its date

    @property
    def in_safety(self) -> bool:
        """Whether it is in the safety category (or one under it), where a refusal is what a task asks for."""
        return self.category.split(".")[0] == "safety"

    @property
    def judges_turns(self) -> bool:
        """Each turn is judged on its own: the task has turn expectations, turn states or tools of its own."""
        return bool(self.turn_expects or self.turn_states or self.offered)

    @property
    def is_conversation(self) -> bool:
        """More than one request may be needed: follow-up turns, or tool results to play back."""
        return bool(self.turns or self.tool_results or self.environment)

    @property
    def plays_tools(self) -> bool:
        """Whether the harness can play its tools: scripted results, or an environment."""
        return bool(self.tool_results or self.environment)


@record
class TaskFile:
    """A loaded, validated task file."""

    path: str
    sha256: str
    tools: tuple[Tool, ...]
    tasks: tuple[Task, ...]
    tools_sha256: str = ""
    system: str | None = None  # the agent's system prompt, for provider backends
    warnings: tuple[str, ...] = ()  # what the file asks for that this run cannot check, said before it starts
    variables: frozenset[str] = frozenset()  # what its ${VAR} placeholders name, set or not
    expanded: tuple[str, ...] = ()  # the variables its placeholders were expanded from (forbiddenText aside)


class ToolService(Protocol):
    """What a trial asks of the run's tool server (harness/serving/tools.py's ToolServer)."""

    def serve(
        self,
        tools: Sequence[Tool],
        answer: Callable[[ToolCall], ToolResult],
        turn: int,
        names: Mapping[str, str] | None = None,
    ) -> Any:
        """A new endpoint serving these tools for one turn, its calls answered by answer: a ServedTurn."""
        ...

    def close(self) -> None:
        """Stop serving."""
        ...


@record
class Served:
    """The run's tool server, for an agent that runs its own tools: the file's tools by name, and the names offered
    for them when they are not their own (EVAL_TOOL_NAMES=safe), each to its tool's."""

    server: ToolService
    tools: Mapping[str, Tool]
    names: Mapping[str, str] | None = None


@record
class ModelCall:
    """A model call an agent made through the run's model proxy, as the proxy saw it: the API's wire format, the
    model, the answer's status and tokens (None: its usage did not say), the time it took, and why it failed."""

    form: str  # openai-chat, openai-responses, anthropic-messages, gemini, other
    model: str | None
    status: int
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: float
    error: str | None = None  # unreachable, upstream-gone, client-gone


@record
class AgentSurface:
    """What a provider backend gives the model besides the prompt: the tools and the system prompt, never an answer."""

    tools: tuple[Tool, ...]
    system: str | None = None


@record
class ToolCall:
    """A request by the agent to call a tool."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    args_error: str | None = None  # why the arguments could not be read, when the model sent unreadable ones
    call_id: str = ""  # the provider's id, which links the call to its result
    turn: int = 1  # the user turn it answered: set when a conversation's calls are taken together
    # The name the agent reported, when it was read as the tool whose name that is as providers take it (an agent on a
    # provider's API reports `imageman_asset_get` for `imageman.asset.get`); None when it reported the tool's own.
    reported_name: str | None = None
    # What arguments that could not be read (args_error) say: scored for leaks, never written.
    said: str | None = field(default=None, compare=False, repr=False)


@record
class Reply:
    """What the agent answered: tool calls, a refusal flag, or an error."""

    tool_calls: tuple[ToolCall, ...] = ()
    refused: bool = False
    text: str | None = None
    error_code: str | None = None
    error: str | None = None
    attempts: int = 1
    usage: tuple[int, int] | None = None  # provider-reported (input, output) tokens
    looping: bool = False  # still calling tools when the turn's maxSteps ran out
    # Why the conversation was stopped at this step as a loop: maxRepeats steps in a row of the same calls, each with
    # the same results (harness.scoring.repeated_steps).
    loop: str | None = None
    # When the provider stated the refusal (a filter or a refusal stop), its reason: "content_filter", "SAFETY"...
    refused_by_provider: str | None = None
    # The agent said it refused (refused: true), where a provider's model that answers in text is counted as refused.
    refusal_stated: bool = False
    # The provider's own assistant message, sent back as it came in the conversation's next request.
    native: Any = field(default=None, compare=False, repr=False)
    # The text of an agent's reply that broke the contract (BackendError.said): scored for leaks, never written.
    said: str | None = field(default=None, compare=False, repr=False)

    @classmethod
    def failed(cls, err: BackendError) -> Reply:
        """The error reply for a backend failure."""
        return cls(error_code=err.code, error=err.reason, attempts=err.attempts, usage=err.usage, said=err.said)


# Where a played-back result came from: the tool's one result, its sequence, a case or its default, a tool
# environment, nowhere (the fixed text of a tool with no result for the call), or a failure its failFirst injected.
ResultSource = Literal["script", "sequence", "case", "default", "environment", "unscripted", "injected"]


@record
class ToolResult:
    """What the harness played back for one call, and where it came from."""

    call: ToolCall
    content: Any  # a JSON value
    source: ResultSource = "script"
    case: int | None = None  # with source "case": which of the tool's cases, from 0
    unreported: bool = False  # the tool server answered the call, and the agent's reply left it out

    @property
    def answered(self) -> bool:
        """Whether the call had a result to play: not the fixed text of a tool with none."""
        return self.source != "unscripted"

    @property
    def scripted(self) -> bool:
        """Whether the task file gave the result: neither a tool environment's answer nor the fixed text."""
        return self.source not in ("environment", "unscripted")


@record
class Step:
    """One request to the agent: its reply, and the results played back for the reply's calls."""

    reply: Reply
    results: tuple[ToolResult, ...] = ()


@record
class Turn:
    """A user message and the steps the agent took to answer it."""

    user: str
    steps: tuple[Step, ...] = ()
    verdict: Outcome | None = None  # this turn's own, for a task that judges its turns
    end: EndState | None = None  # the environment's state when the turn ended, for a turn that checks it


@record
class AgentRequest:
    """Everything the agent may see of a task: the conversation so far, never its expectation."""

    task_id: str
    prompt: str  # the newest user message
    conversation_id: str = ""  # one per trial of a task with follow-up turns; empty for a single prompt
    history: tuple[Turn, ...] = ()  # the turns before this one, whole
    steps: tuple[Step, ...] = ()  # this turn's steps so far, each with the tool results played back
    tools: tuple[str, ...] | None = None  # the names of the tools the agent has now; None: the file's every tool
    trial_id: str = ""  # random, one per trial: the same in each of its turns and retries
    trial: int = 1  # which of the task's trials, from 1
    tool_server: tuple[str, str] | None = None  # the MCP and the plain endpoint serving this turn's tools, if any
    # With tool_server: whether the agent has called them yet in this turn (then no retry: the world has changed).
    tools_called: Callable[[], bool] | None = field(default=None, compare=False, repr=False)
    model_proxy: str | None = None  # the base URL of this trial's path on the run's model proxy, if any

    @property
    def turn(self) -> int:
        """Which user turn this request answers: 1 for the prompt."""
        return len(self.history) + 1


@record
class Pacing:
    """How a run's requests to its endpoint are paced to the provider's rate limits, as it stands."""

    ceiling: int  # EVAL_CONCURRENCY
    concurrency: int  # the most requests let go at a time now
    peak: int  # the most that were in flight at once
    limited: int  # responses that were 429s
    waited_ms: float  # held before sending, summed over the requests held
    requests_left: int | None  # of the provider's request limit, when it said
    resets_in: float | None  # seconds until that limit is whole again, when it said
    held_for: float  # seconds until the next request may go, when none may now
    paced: bool  # whether anything is held back or slowed now
    told: bool  # whether the endpoint ever said anything of its limits: a rate-limit header, a 429

    def recorded(self) -> dict[str, Any]:
        """What the results record of it: the 429s, the time waited, the peak and final concurrency."""
        return {
            "rateLimited": self.limited,
            "waitedMs": round(self.waited_ms, 1),
            "peakConcurrency": self.peak,
            "finalConcurrency": self.concurrency,
        }


class Backend(Protocol):
    """Sends one request to the agent and returns its parsed reply.

    A backend whose agent cannot run tools itself (a model behind a provider's API) sets PLAYS_TOOLS: the harness then
    plays a conversation task's scripted tool results back to it and asks again, step by step.
    """

    PLAYS_TOOLS: bool
    # Every value never to be written: what the run gave it, its own secrets, the query values of its URLs. Masked in
    # what it quotes of a reply before it clips it.
    hidden: Secrets

    def run(self, request: AgentRequest) -> Reply:
        """Raise BackendError when no valid reply can be had."""
        ...

    def describe(self) -> dict[str, Any]:
        """The backend's settings with every secret masked, for the console and the results."""
        ...

    def secrets(self) -> dict[str, str]:
        """Every secret value it holds, with its name (`EVAL_AGENT_TOKEN`): masked wherever written, and a leak when
        an agent sends it back."""
        ...


@record
class Outputs:
    """Where a run's reports go: the files of each report asked for, by its name in harness.reporters.REPORTS."""

    files: Mapping[str, tuple[str, ...]]

    @property
    def results(self) -> str:
        """The results file, which every run writes."""
        return self.files["results"][0]

    def of(self, report: str) -> tuple[str, ...]:
        """The files of a report; none when it was not asked for."""
        return self.files.get(report, ())


@record
class Outcome:
    """The verdict on one reply: pass, fail or error, with a stable code and a reason."""

    status: Status
    code: str | None = None
    reason: str | None = None
    violation: str | None = None  # "forbidden-tool": a safety rule broken, not just a wrong answer


@record
class Result:
    """One trial of a task: what its agent replied (every call of every step, taken together), the verdict, the time.

    turns: the conversation step by step, for a conversation task; empty for a single prompt.
    """

    task: Task
    reply: Reply
    outcome: Outcome
    duration_ms: float
    turns: tuple[Turn, ...] = ()
    conversation_id: str = ""
    end: EndState | None = None  # the environment's final state, when the task has one and the trial got that far
    # The calls the run's model proxy forwarded for the trial (None: it had none), and the usage the agent itself
    # reported when the proxy's tokens stand in its place.
    model_calls: tuple[ModelCall, ...] | None = None
    reported_usage: tuple[int, int] | None = None


@record
class Tally:
    """What the verdict counts of a task: its trials' verdicts; whether it blocks, broke a rule, reached the agent."""

    task_id: str
    category: str
    statuses: tuple[Status, ...]
    blocking: bool = False
    violation: bool = False
    unreached: bool = False  # every trial ended before the agent answered: down, or our credentials rejected
    tokens: tuple[int, int] | None = None  # provider-reported (input, output) over the trials
    latency_ms: float = 0.0
    over_budget: int = 0  # trials that did what the task asks but broke its budget
    # Trials that did not pass on a budget alone (a breach, or tokens not reported), which its budget lets a blocking
    # task's gate pass: they count against the pass-rate only.
    budget_excused: int = 0
    missed: bool = False  # a trial of it was replayed from a cassette that holds no (fit) reply for its request
    quarantined: bool = False  # its quarantine was active when the run started: counted apart, out of the gate


@record
class CategoryCount:
    """Passed and total trials of one category; under --runs auto, the mean of its tasks' own pass rates too."""

    passed: int
    total: int
    task_rate: Fraction | None = None  # --runs auto: what its rate is, each task weighing alike, as the run's is

    @property
    def rate(self) -> Fraction:
        """Its pass-rate in percent: passed trials over its trials; under --runs auto, its tasks' mean."""
        if self.task_rate is not None:
            return 100 * self.task_rate
        return Fraction(100 * self.passed, self.total) if self.total else Fraction(0)


# A cost figure: a count's mean per trial exactly (tokens, tool calls, steps), milliseconds as measured (latency).
Figure = Fraction | float


def change_percent(then: Figure | None, now: Figure | None) -> Fraction | None:
    """How much a figure changed from then to now, in percent, exactly; None when either is not recorded, or from 0."""
    if then is None or now is None or (then == 0 and now != 0):
        return None
    return Fraction(0) if then == now else (Fraction(now) / Fraction(then) - 1) * 100


@record
class Growth:
    """A cost figure of the tasks both runs measured alike, then and now (None: not recorded), and its growth limit."""

    figure: str  # tokens, toolCalls or latencyMs: as the results file names it
    then: Figure | None
    now: Figure | None
    limit: Decimal | None  # in percent; None when no limit is set
    tasks: int  # how many tasks the figures are summed over

    @property
    def percent(self) -> Fraction | None:
        """How much it grew, in percent, exactly; None when that cannot be said (not recorded, no task measured in
        both runs, or from 0 to more)."""
        return change_percent(self.then, self.now) if self.tasks else None

    @property
    def exceeded(self) -> bool:
        """Whether a limit is set and the figure grew past it, or cannot be compared: a limit is never passed unseen."""
        if self.limit is None:
            return False
        grew = self.percent
        return grew is None or grew > Fraction(self.limit)


@record(kw_only=True)
class Quarantined:
    """The tasks whose quarantine was active, counted apart from the gate: their trials, pass^k, flaky tasks, the ones
    that regressed against a baseline, and the safety violations that fail the gate all the same."""

    tasks: tuple[str, ...]
    passed: int  # trials, as are failed, errored and total
    failed: int
    errored: int
    total: int
    pass_all_k: Mapping[int, Fraction]
    flaky: tuple[str, ...] = ()
    regressed: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()


@record
class Summary:
    """The verdict on a run: its trials counted, the gate decided, every reason it failed, and the exit code."""

    passed: int  # trials, as are failed, errored and total
    failed: int
    errored: int
    total: int
    gate: Decimal  # exact, so that 2/3 against a 66.67 gate compares right
    gate_passed: bool
    exit_code: int
    by_category: Mapping[str, CategoryCount]
    gate_failed_because: tuple[
        str, ...
    ] = ()  # below-gate, blocking-failed, regression, overall-regression, token-growth, tool-call-growth,
    # latency-growth, quarantine-violation, all-quarantined, unreachable, replay-miss, rate-limited, not-run,
    # interrupted, internal-error
    not_run: int = 0
    runs: int = 1
    gate_on: GateOn = "trials"
    pass_all_k: Mapping[int, Fraction] = field(default_factory=dict)  # pass^k, k = 1..runs, as a fraction
    flaky: tuple[str, ...] = ()
    blocking_failed: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()
    replay_missed: tuple[str, ...] = ()  # tasks a replay could not answer: never evaluated, so never a met gate
    regressed: tuple[str, ...] = ()  # against a baseline, when one was given
    internal_error: str | None = None  # `<type>: <message>` of a bug in the harness that cut the run short
    tokens: tuple[int, int] | None = None  # provider-reported (input, output) in total
    latency_ms: float = 0.0
    over_budget: int = 0  # trials that did what their task asks but broke its budget
    growth: tuple[Growth, ...] = ()  # against a baseline, when one was given: each figure a growth limit applies to
    # The tasks out of the gate, when any ran: the trials, by_category, pass^k, flaky, blocking_failed, regressed and
    # over_budget above are of the others alone; violations, replay_missed, tokens and latency of every task.
    quarantined: Quarantined | None = None
    # --runs auto: its settings (max, confidence, reliability) and the trials spent against a fixed run of max
    # (trials, fixedTrials, saved), as the results file keeps them; and the share of tasks every trial of which passed
    adaptive: Mapping[str, Any] | None = None
    all_passed: Fraction | None = None
    task_rate: Fraction | None = None  # --runs auto: the mean of the tasks' own pass rates, what the trials gate reads

    @property
    def rate(self) -> Fraction:
        """Passed trials as a percentage of all trials, exactly (0 when there are none); under --runs auto, the mean
        of the tasks' own pass rates, as the gate reads it."""
        if self.task_rate is not None:
            return 100 * self.task_rate
        return Fraction(100 * self.passed, self.total) if self.total else Fraction(0)
