"""The settings of a run: task file, gate, repeats and selection. Each backend declares and reads its own; each report
its own too (harness/reporters), which a run reads here.

Also the one setting of the subcommands read from the environment, so that a run knows it without importing them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from harness import __commit__, __version__
from harness.endpoints import headers
from harness.files import read_capped
from harness.records import ConfigError, GateOn, Outputs, field, record, replace
from harness.reporters import (
    HTML,
    JUNIT,
    REPORT_SETTINGS,
    RESULTS,
    STEP_SUMMARY,
    SUMMARY_MD,
    Input,
    check_outputs,
    outputs,
)
from harness.settings import Reader, Setting, Sources, add_settings, choice, environment_only, number, switch
from harness.taskfile import MAX_BYTES, MAX_BYTES_VAR
from harness.text import MAX_GROWTH
from harness.verdict import EXIT_CODES, GATE_PLACES

if TYPE_CHECKING:
    from harness.adaptive import Auto

HOME = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Beside eval_agent.py; in the single-file build (HOME is then the .pyz file itself), in the working directory.
DEFAULT_TASKS = os.path.join(HOME, "eval-tasks.json") if os.path.isdir(HOME) else "eval-tasks.json"
MAX_TEXT_FILE_BYTES = 8 << 20  # a system prompt: 8 MiB is more text than any model's context holds


def percentage(text: str, where: str) -> Decimal:
    """A percentage from 0 to 100, exact: a gate of 66.67 is not met by 2 of 3."""
    return _percent(text, text.strip(), where, Decimal(100))


def growth_limit(text: str, where: str) -> Decimal:
    """How much a cost may grow against the baseline, in percent, `20` or `20%`: 0 to MAX_GROWTH, exact."""
    return _percent(text, text.strip().removesuffix("%"), where, MAX_GROWTH)


def _percent(text: str, number: str, where: str, most: Decimal) -> Decimal:
    try:
        value = Decimal(number)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value < 0 or value > most:
        raise ConfigError(f"{where}: expected a percentage from 0 to {most}, got {text!r}")
    if -value.normalize().as_tuple().exponent > GATE_PLACES:  # type: ignore[operator]
        raise ConfigError(f"{where}: at most {GATE_PLACES} decimals, got {text!r}")
    return value


def runs(text: str, where: str) -> int | Auto:
    """`N` trials of every task, or `auto` / `auto:MAX`: each repeated until the sequential test settles it."""
    if not text.strip().startswith("auto"):
        try:
            return read_runs(text, where)
        except ConfigError:  # say auto too: `AUTO` read as a number is a puzzle
            raise ConfigError(
                f"{where}: expected a whole number from 1 to 100, auto or auto:MAX, got {text!r}"
            ) from None
    word, colon, most = text.strip().partition(":")
    from harness.adaptive import DEFAULT_MOST, Auto  # only a run of auto runs pays for the test

    if word == "auto" and not colon:
        return Auto(DEFAULT_MOST)
    if word == "auto" and most.isascii() and most.isdigit() and len(most) < 4 and 1 <= int(most) <= 100:
        return Auto(int(most))
    raise ConfigError(f"{where}: expected auto or auto:MAX, MAX a whole number from 1 to 100, got {text!r}")


def open_percentage(low: int) -> Reader:
    """A reader of a percentage above low and below 100, exact, as a gate is."""

    def read(text: str, where: str) -> Decimal:
        try:
            value = percentage(text, where)
        except ConfigError:
            value = Decimal(low)
        if not low < value < 100:
            raise ConfigError(f"{where}: expected a percentage above {low} and below 100, got {text!r}")
        return value

    return read


def globs(value: list[str] | str, where: str) -> tuple[str, ...]:
    """Patterns from a repeated flag, or from a variable split at commas."""
    patterns = value if isinstance(value, list) else value.split(",")
    return tuple(pattern.strip() for pattern in patterns if pattern.strip())


def shard(text: str, where: str) -> tuple[int, int]:
    """`K/N`: the K-th of N slices."""
    index, slash, count = (part.strip() for part in text.partition("/"))
    # ASCII digits, and few of them: int() refuses a superscript two that isdigit() takes, and 4,301 digits.
    if slash and all(part.isascii() and part.isdigit() and len(part) < 10 for part in (index, count)):
        if 1 <= int(index) <= int(count):
            return int(index), int(count)
    raise ConfigError(f"{where}: expected K/N with 1 <= K <= N, e.g. 2/4, got {text!r}")


def text_file(path: str, where: str) -> str:
    """The text of a file that must not be empty, nor over MAX_TEXT_FILE_BYTES."""
    try:
        raw = read_capped(path, MAX_TEXT_FILE_BYTES)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if len(raw) > MAX_TEXT_FILE_BYTES:
        raise ConfigError(f"{where}: {path} is over the {MAX_TEXT_FILE_BYTES} bytes it may have")
    if not text.strip():
        raise ConfigError(f"{where}: {path} is empty")
    return text


GATE = Setting(
    var="EVAL_GATE",
    flag="--gate",
    help="minimum pass-rate in percent, 0-100, decimals allowed",
    read=percentage,
    default=Decimal(80),
    metavar="PERCENT",
)
TASKS = Setting(
    var="EVAL_TASKS",
    flag="--tasks",
    help="the task file",
    default=DEFAULT_TASKS,
    metavar="FILE",
    shown="eval-tasks.json beside eval_agent.py (for eval_agent.pyz: in the working directory)",
)
SYSTEM_PROMPT = Setting(
    var="EVAL_SYSTEM_PROMPT_FILE",
    flag="--system-prompt-file",
    help="the agent's system prompt, which the provider backends send, instead of the task file's",
    read=text_file,
    metavar="FILE",
)
MAX_TASK_FILE_BYTES = Setting(
    var=MAX_BYTES_VAR,
    flag="--max-task-file-bytes",
    help="the largest task file read, in bytes",
    read=number(int, 1, 2**40),
    default=MAX_BYTES,
    metavar="N",
)
CONCURRENCY = Setting(
    var="EVAL_CONCURRENCY",
    flag="--concurrency",
    help="tasks in flight at once; the most, when a provider's rate limits hold the run back",
    read=number(int, 1, 256),
    default=4,
    metavar="N",
)
read_runs = number(int, 1, 100)
RUNS = Setting(
    var="EVAL_RUNS",
    flag="--runs",
    help="trials of every task, for pass^k and flakiness; auto (auto:MAX, MAX 10 unless given): each task repeated "
    "until a sequential test settles whether it passes reliably, at most MAX times",
    read=runs,
    default=1,
    metavar="N",
)
CONFIDENCE = Setting(
    var="EVAL_CONFIDENCE",
    flag="--confidence",
    help="with --runs auto: how sure the test is of each verdict, in percent (its error rate: 100 minus this)",
    read=open_percentage(50),
    default=Decimal(95),
    metavar="PERCENT",
)
RELIABILITY = Setting(
    var="EVAL_RELIABILITY",
    flag="--reliability",
    help="with --runs auto: the pass rate in percent a task must have to be reliable",
    read=open_percentage(0),
    default=Decimal(90),
    metavar="PERCENT",
)
GATE_ON = Setting(
    var="EVAL_GATE_ON",
    flag="--gate-on",
    help="what the gate applies to: trials (the trial pass-rate; with --runs auto, the mean of the tasks' own) or "
    "pass-all (pass^N; with --runs auto, the share of tasks every trial of which passed)",
    read=choice("trials", "pass-all"),
    default="trials",
    metavar="WHAT",
)
TASK_GLOBS = Setting(
    var="EVAL_TASK_GLOB",
    flag="--task",
    help="run only tasks whose id matches; repeatable (the variable: comma-separated)",
    read=globs,
    default=(),
    metavar="GLOB",
    many=True,
)
CATEGORY_GLOBS = Setting(
    var="EVAL_CATEGORY_GLOB",
    flag="--category",
    help="run only tasks whose category matches; repeatable (the variable: comma-separated)",
    read=globs,
    default=(),
    metavar="GLOB",
    many=True,
)
SHARD = Setting(
    var="EVAL_SHARD",
    flag="--shard",
    help="run the K-th of N deterministic slices of the selected tasks",
    read=shard,
    metavar="K/N",
)
DRY_RUN = Setting(
    var="EVAL_DRY_RUN",
    flag="--dry-run",
    help="check the task file and settings, list what would run, send nothing",
    read=switch,
    default=False,
    shown="off; 1 is on",
    switch=True,
)
BASELINE = Setting(
    var="EVAL_BASELINE",
    flag="--baseline",
    help="compare with this results file and fail on any regression",
    metavar="FILE",
)
MAX_TOKEN_GROWTH = Setting(
    var="EVAL_MAX_TOKEN_GROWTH",
    flag="--max-token-growth",
    help="fail the gate when the tokens of the tasks in both runs grow more than this percent against --baseline",
    read=growth_limit,
    metavar="PERCENT",
)
MAX_LATENCY_GROWTH = Setting(
    var="EVAL_MAX_LATENCY_GROWTH",
    flag="--max-latency-growth",
    help="fail the gate when the latency of the tasks in both runs grows more than this percent against --baseline",
    read=growth_limit,
    metavar="PERCENT",
)
MAX_TOOL_CALL_GROWTH = Setting(
    var="EVAL_MAX_TOOL_CALL_GROWTH",
    flag="--max-tool-call-growth",
    help="fail the gate when the tool calls of the tasks in both runs grow more than this percent against --baseline",
    read=growth_limit,
    metavar="PERCENT",
)
# The growth limits, by the figure of the results file each applies to.
GROWTH_LIMITS = {"tokens": MAX_TOKEN_GROWTH, "latencyMs": MAX_LATENCY_GROWTH, "toolCalls": MAX_TOOL_CALL_GROWTH}
RECORD = Setting(
    var="EVAL_RECORD",
    flag="--record",
    help="record every exchange with the agent or provider to this cassette (JSON Lines)",
    metavar="FILE",
)
REPLAY = Setting(
    var="EVAL_REPLAY",
    flag="--replay",
    help="answer every request from this cassette: no network, no key; a request it does not hold is replay:miss",
    metavar="FILE",
)
RECORD_MISSING = Setting(
    var="EVAL_RECORD_MISSING",
    flag="--record-missing",
    help="with --replay: send what the cassette misses to the live backend, and write the filled cassette back",
    read=switch,
    default=False,
    shown="off; 1 is on",
    switch=True,
)
MCP_HEADERS = Setting(
    var="EVAL_MCP_HEADERS",
    flag=None,
    help="a JSON object of headers for every request to --mcp-url",
    read=headers,
    default={},
    secret=True,
)
RUN_SETTINGS = (
    GATE, TASKS, MAX_TASK_FILE_BYTES, RESULTS, SYSTEM_PROMPT, CONCURRENCY, RUNS, CONFIDENCE, RELIABILITY, GATE_ON,
    TASK_GLOBS, CATEGORY_GLOBS, SHARD, DRY_RUN, JUNIT, HTML, SUMMARY_MD, STEP_SUMMARY, BASELINE, MAX_TOKEN_GROWTH,
    MAX_LATENCY_GROWTH, MAX_TOOL_CALL_GROWTH, RECORD, REPLAY, RECORD_MISSING,
)  # fmt: skip


@record
class Config:
    """Everything one run needs to know besides its backend's own settings."""

    tasks_path: str
    gate: Decimal
    max_task_file_bytes: int
    outputs: Outputs
    run_id: str
    system_prompt: str | None = field(default=None, repr=False)
    concurrency: int = 4
    runs: int = 1  # trials of every task; under auto, the most a task may have
    auto: Auto | None = None  # --runs auto: each task repeated until the sequential test settles it
    gate_on: GateOn = "trials"
    task_globs: tuple[str, ...] = ()
    category_globs: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None
    dry_run: bool = False
    baseline_path: str | None = None
    growth_limits: Mapping[str, Decimal] = field(default_factory=dict)  # figure -> percent: see GROWTH_LIMITS
    record_path: str | None = None
    replay_path: str | None = None
    record_missing: bool = False


def run_config(sources: Sources) -> Config:
    """The run's own settings; ConfigError names the flag or variable that is wrong."""
    return Config(
        tasks_path=sources.get(TASKS),
        gate=sources.get(GATE),
        max_task_file_bytes=sources.get(MAX_TASK_FILE_BYTES),
        outputs=outputs(sources, [*_reads(sources), _input(sources, REPLAY, "the cassette")]),
        run_id=os.urandom(16).hex(),
        system_prompt=sources.get(SYSTEM_PROMPT),
        concurrency=sources.get(CONCURRENCY),
        **_runs(sources),
        gate_on=sources.get(GATE_ON),
        task_globs=sources.get(TASK_GLOBS),
        category_globs=sources.get(CATEGORY_GLOBS),
        shard=sources.get(SHARD),
        dry_run=sources.get(DRY_RUN),
        baseline_path=sources.get(BASELINE),
        growth_limits=growth_limits(sources),
        **_cassette(sources),
    )


def _runs(sources: Sources) -> dict[str, Any]:
    """Trials of every task, or auto with its most trials, confidence and reliability; ConfigError naming a confidence
    or a reliability given without auto, which it would not change."""
    given = sources.get(RUNS)
    if isinstance(given, int):
        for setting, what in ((CONFIDENCE, "confidence"), (RELIABILITY, "target")):
            if sources.given(setting):
                raise ConfigError(
                    f"{sources.text(setting)[1]}: only with {RUNS.flag} auto (or {RUNS.var}=auto), which it is the "
                    f"{what} of"
                )
        return {"runs": given}
    auto = replace(given, confidence=sources.get(CONFIDENCE), reliability=sources.get(RELIABILITY))
    return {"runs": auto.most, "auto": auto}


def growth_limits(sources: Sources) -> dict[str, Decimal]:
    """The growth limits given, by figure; ConfigError naming a limit given without a baseline, and the baseline."""
    given = {figure: setting for figure, setting in GROWTH_LIMITS.items() if sources.given(setting)}
    if given and not sources.given(BASELINE):
        where = sources.text(next(iter(given.values())))[1]
        raise ConfigError(
            f"{where}: a growth limit needs a baseline to grow from: give {BASELINE.flag} ({BASELINE.var})"
        )
    return {figure: sources.get(setting) for figure, setting in given.items()}


def _cassette(sources: Sources) -> dict[str, Any]:
    """Where a run records or replays its exchanges: one or the other, filled from the live backend on request."""
    record, replay, missing = (sources.get(setting) for setting in (RECORD, REPLAY, RECORD_MISSING))
    for setting, path in ((RECORD, record), (REPLAY, replay)):
        if path == "":
            raise ConfigError(f"{sources.text(setting)[1]}: an empty file name")
    if missing and replay is None:
        raise ConfigError(f"{sources.text(RECORD_MISSING)[1]}: only with {REPLAY.flag} (or {REPLAY.var})")
    if record is not None and replay is not None:
        raise ConfigError(
            f"{sources.text(RECORD)[1]} and {sources.text(REPLAY)[1]}: give one; to add what a cassette misses, "
            f"replay it with {RECORD_MISSING.flag}"
        )
    written = record if record is not None else replay if missing else None
    if written is not None:  # checked now, with the reports: a run that cannot write it would lose what it recorded
        reports = [(path, sources.text(setting)[1]) for setting in REPORT_SETTINGS if (path := sources.get(setting))]
        where = sources.text(RECORD if record is not None else REPLAY)[1]
        check_outputs([*reports, (written, where)], _reads(sources), "a run")
    return {"record_path": record, "replay_path": replay, "record_missing": missing}


def _reads(sources: Sources) -> list[Input]:
    """The files a run reads that nothing it writes may be: the task file and the baseline."""
    return [_input(sources, TASKS, "the task file"), _input(sources, BASELINE, "the baseline")]


def _input(sources: Sources, setting: Setting, what: str) -> Input:
    """A file the run reads, as outputs() checks that no report is written over it."""
    return sources.get(setting), sources.text(setting)[1], what


def read_command_line(
    argv: Sequence[str],
    environ: Mapping[str, str],
    run_settings: Sequence[Setting],
    backends: Mapping[str, Sequence[Setting]],
    subcommands: Mapping[str, str],
) -> Sources:
    """The command line parsed against every setting there is, over the environment."""
    if not argv:
        return Sources(SimpleNamespace(), environ)  # what argparse would make of no flags, without its 5 ms to start
    import argparse

    from harness.flags import Parser

    parser = Parser(
        prog="eval_agent.py",
        usage="eval_agent.py [SETTING ...]\n       eval_agent.py SUBCOMMAND ... (see below)",
        description="Evaluate a tool-using agent against canonical tasks and gate the release on its pass-rate.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(
            [
                "settings read from the environment only (secrets never come from flags):",
                *environment_only({"": run_settings, **backends}),
                "",
                "subcommands (eval_agent.py SUBCOMMAND --help for each):",
                *(f"  {name:<20} {what}" for name, what in subcommands.items()),
                "",
                f"exit codes: {EXIT_CODES}",
            ]
        ),
    )
    add_settings(parser, "the run", {"": run_settings})
    add_settings(parser, "the backends", backends)
    built = f" (built from {__commit__})" if __commit__ else ""
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}{built}")
    return Sources(parser.parse_args(argv), environ)
