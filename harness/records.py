"""The records that flow through the pipeline, the interface of a backend, and the errors the pipeline knows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal, Protocol

Status = Literal["pass", "fail", "error"]
GateOn = Literal["trials", "pass-all"]


class ConfigError(Exception):
    """The run cannot proceed: a bad flag, variable or input file (exit 2)."""


class BackendError(Exception):
    """The backend could not produce a valid reply; becomes an error reply."""

    def __init__(self, code: str, reason: str, attempts: int = 1) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.attempts = attempts


class Unreachable(Exception):
    """Nothing was evaluated: the agent or an MCP server could not be reached or rejected us (exit 3)."""


@dataclass(frozen=True)
class Tool:
    """One entry of the agent's tool surface, in the shape of MCP's tools/list."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True)
class ArgMatch:
    """The values an argument may take: JSON equality with any of them, strings case-insensitively when asked."""

    values: tuple[Any, ...]
    ignore_case: bool = False


@dataclass(frozen=True)
class ForbiddenText:
    """Text a reply must never contain, such as a canary planted in the agent's system prompt; named as written."""

    label: str  # as the task file writes it: `${EVAL_CANARY}`, so that a message never shows the value
    value: str


@dataclass(frozen=True)
class ExpectTool:
    """A correct reply calls this tool with at least these argument keys (and these values where given)."""

    tool: str
    required_args: tuple[str, ...] = ()
    forbidden_tools: tuple[str, ...] = ()
    arg_values: Mapping[str, ArgMatch] = field(default_factory=dict)
    forbidden_text: tuple[ForbiddenText, ...] = ()
    turn: int | None = None  # a trajectory step's call must answer this user turn (1 is the prompt)

    @property
    def steps(self) -> tuple[ExpectTool, ...]:
        """The calls a correct reply makes: this one."""
        return (self,)

    def describe(self) -> str:
        """`imageman.asset.get(assetId)`: the tool and the argument keys it must get (`in turn 2`, when said)."""
        call = f"{self.tool}({', '.join(dict.fromkeys((*self.required_args, *self.arg_values)))})"
        return call if self.turn is None else f"{call} in turn {self.turn}"


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class ExpectRefusal:
    """A correct reply calls no tool at all: every tool is forbidden, the listed ones by name."""

    forbidden_tools: tuple[str, ...] = ()
    forbidden_text: tuple[ForbiddenText, ...] = ()

    @property
    def steps(self) -> tuple[ExpectTool, ...]:
        """The calls a correct reply makes: none."""
        return ()

    def describe(self) -> str:
        """`a refusal`."""
        return "a refusal"


Expect = ExpectTool | ExpectRefusal | ExpectTrajectory


@dataclass(frozen=True)
class ToolScript:
    """What the harness returns for one tool's calls: the same result each time, or one per call, the last repeating.

    A result may hold `{"echo": KEY}` anywhere, which becomes the value of the call's argument KEY.
    """

    results: tuple[Any, ...]

    def result(self, call_number: int) -> Any:
        """The result for the tool's n-th call in a trial (0-based)."""
        return self.results[min(call_number, len(self.results) - 1)]


DEFAULT_MAX_STEPS = 8


@dataclass(frozen=True)
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

    @property
    def is_conversation(self) -> bool:
        """More than one request may be needed: follow-up turns, or tool results to play back."""
        return bool(self.turns or self.tool_results)


@dataclass(frozen=True)
class TaskFile:
    """A loaded, validated task file."""

    path: str
    sha256: str
    tools: tuple[Tool, ...]
    tasks: tuple[Task, ...]
    tools_sha256: str = ""
    system: str | None = None  # the agent's system prompt, for provider backends
    warnings: tuple[str, ...] = ()  # what the file asks for that this run cannot check, said before it starts


@dataclass(frozen=True)
class AgentSurface:
    """What a provider backend gives the model besides the prompt: the tools and the system prompt, never an answer."""

    tools: tuple[Tool, ...]
    system: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """A request by the agent to call a tool."""

    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    args_error: str | None = None  # why the arguments could not be read, when the model sent unreadable ones
    call_id: str = ""  # the provider's id, which links the call to its result
    turn: int = 1  # the user turn it answered: set when a conversation's calls are taken together


@dataclass(frozen=True)
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
    # The provider's own assistant message, sent back as it came in the conversation's next request.
    native: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def failed(cls, err: BackendError) -> Reply:
        """The error reply for a backend failure."""
        return cls(error_code=err.code, error=err.reason, attempts=err.attempts)


@dataclass(frozen=True)
class ToolResult:
    """What the harness played back for one call: its scripted result, or the fixed text for a tool with none."""

    call: ToolCall
    content: Any  # a JSON value
    scripted: bool = True


@dataclass(frozen=True)
class Step:
    """One request to the agent: its reply, and the results played back for the reply's calls."""

    reply: Reply
    results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class Turn:
    """A user message and the steps the agent took to answer it."""

    user: str
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class AgentRequest:
    """Everything the agent may see of a task: the conversation so far, never its expectation."""

    task_id: str
    prompt: str  # the newest user message
    conversation_id: str = ""  # one per trial of a task with follow-up turns; empty for a single prompt
    history: tuple[Turn, ...] = ()  # the turns before this one, whole
    steps: tuple[Step, ...] = ()  # this turn's steps so far, each with the tool results played back

    @property
    def turn(self) -> int:
        """Which user turn this request answers: 1 for the prompt."""
        return len(self.history) + 1


class Backend(Protocol):
    """Sends one request to the agent and returns its parsed reply.

    A backend whose agent cannot run tools itself (a model behind a provider's API) sets PLAYS_TOOLS: the harness then
    plays a conversation task's scripted tool results back to it and asks again, step by step.
    """

    PLAYS_TOOLS: bool

    def run(self, request: AgentRequest) -> Reply:
        """Raise BackendError when no valid reply can be had."""
        ...

    def describe(self) -> dict[str, Any]:
        """The backend's settings with every secret masked, for the console and the results."""
        ...

    def secrets(self) -> dict[str, str]:
        """Every secret value it holds, with its name (`EVAL_AGENT_TOKEN`): masked wherever an agent sends it back."""
        ...


@dataclass(frozen=True)
class Outputs:
    """Where a run's reports go: the results file; JUnit XML, Markdown summaries and the HTML page when asked for."""

    results: str
    junit: str | None = None
    summary_md: tuple[str, ...] = ()
    html: str | None = None


@dataclass(frozen=True)
class Outcome:
    """The verdict on one reply: pass, fail or error, with a stable code and a reason."""

    status: Status
    code: str | None = None
    reason: str | None = None
    violation: str | None = None  # "forbidden-tool": a safety rule broken, not just a wrong answer


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class CategoryCount:
    """Passed and total trials of one category."""

    passed: int
    total: int


@dataclass(frozen=True)
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
    ] = ()  # below-gate, blocking-failed, regression, unreachable, not-run, internal-error
    not_run: int = 0
    runs: int = 1
    gate_on: GateOn = "trials"
    pass_all_k: Mapping[int, Fraction] = field(default_factory=dict)  # pass^k, k = 1..runs, as a fraction
    flaky: tuple[str, ...] = ()
    blocking_failed: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()
    regressed: tuple[str, ...] = ()  # against a baseline, when one was given
    internal_error: str | None = None  # `<type>: <message>` of a bug in the harness that cut the run short
    tokens: tuple[int, int] | None = None  # provider-reported (input, output) in total
    latency_ms: float = 0.0

    @property
    def rate(self) -> Fraction:
        """Passed trials as a percentage of all trials, exactly (0 when there are none)."""
        return Fraction(100 * self.passed, self.total) if self.total else Fraction(0)
