"""Evaluate a tool-using agent against canonical tasks and gate the release on its pass-rate.

The entrypoint: the subcommands, one boundary that turns every exception into its exit code, and the run itself,
the pipeline in reading order.
"""

from __future__ import annotations

if __name__ == "__main__":
    # Ctrl-C or a signal while the harness is still starting: exit as an interrupted run does, without a traceback.
    # _signal is built in and loaded with the interpreter; importing signal first would take an interruptible 9 ms.
    # The handler exits at once rather than raise: nothing is written yet, and an exception raised where the importer
    # runs a callback of its own is printed as ignored and lost.
    try:
        import _signal  # type: ignore[import-not-found]

        try:
            from posix import _exit
        except ImportError:  # Windows
            from nt import _exit  # type: ignore[no-redef,attr-defined]

        def _stop_while_starting(signum: int, frame: object) -> None:
            _exit(130)

        for _signum in (_signal.SIGINT, _signal.SIGTERM, getattr(_signal, "SIGHUP", _signal.SIGTERM)):
            if _signal.getsignal(_signum) is not _signal.SIG_IGN:  # ignored where started (nohup, `&`): it stays so
                _signal.signal(_signum, _stop_while_starting)
    except KeyboardInterrupt:  # a Ctrl-C before the handlers were in place
        raise SystemExit(130) from None

# The built-in signal module: `signal` itself makes three enums of them as it is imported (0.5 ms of every start).
import _signal  # type: ignore[import-not-found]
import importlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from backends import BACKEND, BACKENDS, choose
from backends.options import TOOL_SERVER, TOOL_SERVER_HOST, Serving
from harness.config import MAX_TOKEN_GROWTH, MCP_HEADERS, RUN_SETTINGS, Config, read_command_line, run_config
from harness.endpoints import environment_secrets, variable_secrets
from harness.leaks import Secrets
from harness.records import AgentSurface, ConfigError, Served, Task, TaskFile, Unreachable
from harness.reporters.console import complain, dry_run_lines, plan_line, say
from harness.results import baseline_record, load_results, partial
from harness.running import INTERRUPTED, HandingOn
from harness.selection import select_tasks, shard_of
from harness.settings import refuse_unknown
from harness.stages import STOP_SIGNALS, Run, judge, report, send, write
from harness.taskfile import load_task_file
from harness.text import internal_error, provider_name, utc_today
from harness.verdict import EXIT_CONFIG, EXIT_GATE_MET, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_UNREACHABLE

if TYPE_CHECKING:
    from harness.serving.models import ModelProxy

# What the process that started the run ignores stays ignored, as Python itself leaves an ignored SIGINT: nohup's
# SIGHUP, a shell script's `cmd &` SIGINT.
IGNORED_WHERE_STARTED = frozenset(s for s in (_signal.SIGINT, *STOP_SIGNALS) if _signal.getsignal(s) is _signal.SIG_IGN)
# name -> (the module whose main(argv) runs it, what it does); with none of these first, the arguments are a run's.
SUBCOMMANDS = {
    "merge": (
        "harness.subcommands.merge",
        "join the results files of the shards of one run into one, and apply the gate",
    ),
    "compare": ("harness.subcommands.compare", "compare a run with a baseline run: regressions first"),
    "validate": (
        "harness.subcommands.validate",
        "check a task file: every problem at once, coverage, drift from a live MCP server",
    ),
    "audit": (
        "harness.subcommands.audit",
        "mutation testing of a task file: the bad behaviours each task lets pass, and the kill rate per kind",
    ),
    "tools": ("harness.subcommands.tools", "print a live MCP server's tools in the task file's format"),
    "report": ("harness.subcommands.report", "render a results file as one self-contained HTML page"),
    "import": ("harness.subcommands.importing", "print a task file made from another harness's evalset (evalbench)"),
    "doctor": (
        "harness.subcommands.doctor",
        "send a few small probes through the run's provider backend: what works, and the setting that fixes the rest",
    ),
}
# Every setting declared, whoever reads it: a variable for a backend other than the one a run uses is no typo, and a
# secret it holds is masked all the same.
SETTINGS = (BACKEND, *RUN_SETTINGS, MCP_HEADERS, *(s for backend in BACKENDS.values() for s in backend.SETTINGS))
DECLARED = frozenset(setting.var for setting in SETTINGS)
# The subcommands that read EVAL_ settings and a task file: they refuse an unknown variable as a run does.
CHECKED = {"validate"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand the arguments name, or a run; turn what it raises into one line on stderr and an exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    prog = f"eval_agent {name}" if name else "eval_agent"
    for signum in (_signal.SIGINT, *STOP_SIGNALS):
        if signum not in IGNORED_WHERE_STARTED:
            _signal.signal(signum, _interrupt)
    sys.unraisablehook = _unraisable
    try:
        if name is None:
            return run(argv)
        subcommand = importlib.import_module(SUBCOMMANDS[name][0])
        if name == "validate":
            return subcommand.main(argv[1:], SETTINGS, schema_notes())
        if name == "audit":
            return subcommand.main(argv[1:], SETTINGS)
        if name == "doctor":  # the engine imports no backend: doctor is handed the registry
            return subcommand.main(argv[1:], subcommand.Registry(BACKEND, BACKENDS, choose, SETTINGS))
        return subcommand.main(argv[1:], DECLARED) if name in CHECKED else subcommand.main(argv[1:])
    except ConfigError as exc:
        complain(f"{prog}: error: {exc}")
        return EXIT_CONFIG
    except Unreachable as exc:
        complain(f"{prog}: error: {exc}")
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug in the harness, never a verdict on the agent
        import traceback

        # A bug's message can quote what it was handling: masked, as a reply is, with every secret the settings hold.
        secrets = Secrets(environment_secrets(SETTINGS, os.environ))
        complain(secrets.mask(f"{prog}: internal error: {internal_error(exc)}"))
        print(secrets.mask("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
        return EXIT_INTERNAL


def schema_notes() -> dict[str, Any]:
    """What each backend does not send of a tool's inputSchema, for validate to list (the engine imports no backend):
    asked of every backend, which imports them all."""
    return {name: backend.schema_notes for name, backend in BACKENDS.items() if hasattr(backend, "schema_notes")}


def configure(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[Config, str, Any]:
    """Every setting of a run, read and checked: the run's own, the backend's name, and that backend's own."""
    sources = read_command_line(
        argv,
        environ,
        (BACKEND, *RUN_SETTINGS),
        {backend.NAME: backend.SETTINGS for backend in BACKENDS.values()},
        {name: what for name, (_, what) in SUBCOMMANDS.items()},
    )
    config = run_config(sources)
    backend_name = choose(sources)
    return config, backend_name, BACKENDS[backend_name].configure(sources)


def run(argv: Sequence[str]) -> int:
    """Load and check everything, send every task, score every reply, decide the verdict, write the results, report."""
    prepared = prepare(*configure(argv, os.environ))
    config, tasks, hidden = prepared.config, prepared.tasks, prepared.hidden
    if config.dry_run:
        for line in dry_run_lines(prepared.plan, config, tasks, prepared.settings, prepared.today):
            say(hidden.mask(line))
        return EXIT_GATE_MET
    try:
        if any(task.environment for task in tasks):  # the user's code is started now, in workers: never in here
            from harness.environments import check_environments

            check_environments(config.tasks_path, tasks, hidden)
        sent = send(prepared)
        summary, comparison = judge(prepared, sent)
        write(prepared, sent, summary, comparison)
        return report(prepared, sent, summary, comparison)
    finally:
        if prepared.served is not None:  # the run's boundary: also on Ctrl-C and on a bug
            prepared.served.server.close()
        if prepared.proxy is not None:
            prepared.proxy.close()


def prepare(config: Config, backend_name: str, backend_settings: Any) -> Run:
    """The run set up, before anything is sent: its tasks, its backend, the secrets by role, the cassette, the
    baseline and the plan, with every check that can refuse it made (exit 2)."""
    task_file = load_task_file(config.tasks_path, max_bytes=config.max_task_file_bytes)
    refuse_unknown(os.environ, DECLARED, task_file.variables)
    selected = select_tasks(task_file.tasks, config.task_globs, config.category_globs)
    tasks = shard_of(selected, *config.shard) if config.shard else selected
    today = utc_today()  # once: a run that goes past midnight holds each task's quarantine as it started
    warnings = list(task_file.warnings)
    if any(task.quarantine for task in tasks):
        from harness.taskfile.quarantine import quarantine_warnings

        warnings += quarantine_warnings(tasks, today)
    if config.auto is not None:
        from harness.adaptive import unsettled

        warnings += unsettled(config.auto)
    surface = AgentSurface(task_file.tools, config.system_prompt or task_file.system)
    # Every secret the run can know, whichever backend runs: what the environment holds, what the tasks expanded.
    known = Secrets(
        environment_secrets(SETTINGS, os.environ) | variable_secrets(task_file.expanded, SETTINGS, os.environ)
    )
    for warning in warnings:  # a task's id may hold what its placeholders expanded, as its entry's does
        complain(known.mask(f"eval_agent: warning: {warning}"))
    forbidden = Secrets(
        {
            text.value: text.label
            for task in tasks
            for expected in (task.expect, *task.turn_expects)  # a turn's forbidden text is never written either
            if expected is not None
            for text in expected.forbidden_text
        }
    )
    tape = None
    if config.record_path is not None or config.replay_path is not None:
        from harness.cassette import open_tape

        tape = open_tape(config, backend_name, [task.id for task in task_file.tasks], forbidden)  # the file's order
    replayed = Secrets(tape.secrets() if tape else {})  # where a recorded reply held a secret: leaked on replay too
    backend = BACKENDS[backend_name](backend_settings, surface, config.run_id, hidden=known | forbidden | replayed)
    judged = next((state for task in tasks for state in (task.state, *task.turn_states) if state), None)
    # An agent that runs its own tools is served the tools the harness plays; on a replay, the cassette plays the calls.
    serving: Serving | None = getattr(backend_settings, "serving", None)
    served = serving is not None and any(task.plays_tools for task in tasks)
    upstream: str | None = getattr(backend_settings, "model_proxy", None)
    # A replay of an agent whose model calls the run proxies runs the agent, and its served tools, live.
    replaying = tape is not None and tape.replaying and not upstream
    unserved = tape.unserved() if judged is not None and served and tape is not None and replaying else None
    if unserved is not None:  # recorded before a cassette held the served calls: no call to play, no world changed
        judged = next(
            (state for task in tasks if task.id in unserved for state in (task.state, *task.turn_states) if state), None
        )
    if judged is not None and not backend.PLAYS_TOOLS and serving is None and hasattr(backend_settings, "serving"):
        raise ConfigError(
            f"{config.tasks_path}: {judged.where}: {TOOL_SERVER.var}=off serves the {backend_name} backend's agent no "
            "tools, and a state is judged on the world its served calls changed; run state checks with the tools "
            f"served ({TOOL_SERVER.var}=on) or on a provider backend"
        )
    if judged is not None and not backend.PLAYS_TOOLS and (not served or unserved is not None):
        raise ConfigError(
            f"{config.tasks_path}: {judged.where}: a replay of the {backend_name} backend's agent, which runs its own "
            "tools, has no served calls to judge a state by; run state checks live (the harness serves the agent "
            "its tools) or on a provider backend"
        )
    secrets = known | Secrets(backend.secrets()) | replayed  # a leak when a reply holds one
    hidden = backend.hidden  # never written: these, the forbidden text, the query values of the backend's URLs
    if hidden and secrets:  # as send masks each entry's id
        _refuse_alike_ids(config.tasks_path, task_file, selected, secrets)
    baseline = load_results(config.baseline_path) if config.baseline_path else None
    if baseline is not None and partial(baseline):
        raise ConfigError(f"{config.baseline_path}: a partial run ({partial(baseline)}) cannot be a baseline")
    compared_with = baseline_record(config.baseline_path, baseline) if config.baseline_path and baseline else None
    if baseline is not None:
        from harness.costs import require_tokens  # what a comparison weighs: a run without one, nothing

        if "tokens" in config.growth_limits:
            require_tokens(config.baseline_path or "", baseline, f"{MAX_TOKEN_GROWTH.flag} ({MAX_TOKEN_GROWTH.var})")
    settings = backend.describe()
    plan = hidden.mask(plan_line(config, tasks, task_file, backend_name, settings, getattr(backend, "CAVEAT", "")))
    if config.replay_path:
        plan += f", replaying {config.replay_path}"
    offline = config.replay_path is not None and not config.record_missing  # a replay's proxy sends nothing upstream
    return Run(
        served=_tool_server(serving, task_file) if serving and served and not config.dry_run else None,
        proxy=_model_proxy(upstream, offline) if upstream and not config.dry_run else None,
        config=config,
        task_file=task_file,
        selected=selected,
        tasks=tasks,
        surface=surface,
        backend_name=backend_name,
        backend=backend,
        settings=settings,
        secrets=secrets,
        hidden=hidden,
        tape=tape,
        baseline=baseline,
        compared_with=compared_with,
        plan=plan,
        today=today,
    )


def _refuse_alike_ids(path: str, task_file: TaskFile, selected: Sequence[Task], secrets: Secrets) -> None:
    """ConfigError when two of the selected tasks' ids read the same once their secrets are masked: the results, a
    comparison and a quarantine tell tasks apart by id alone."""
    joined = "\n".join(task.id for task in selected)
    if secrets.mask(joined) == joined:  # no id holds a secret, as a rule: one search over them all tells
        return
    seen: dict[str, str] = {}
    for task in selected:
        shown = secrets.mask(task.id)
        if shown in seen:
            first, second = (
                next(i for i, t in enumerate(task_file.tasks) if t.id == one) for one in (seen[shown], task.id)
            )
            raise ConfigError(
                f"{path}: tasks[{first}].id and tasks[{second}].id both read {json.dumps(shown)} once the secrets in"
                " them are masked, so their results could not be told apart: give them ids that differ outside their"
                " secrets"
            )
        seen[shown] = task.id


def _tool_server(serving: Serving, task_file: TaskFile) -> Served:
    """The run's tool server, started: the last thing a run sets up, as the run's boundary shuts it down."""
    from harness.serving.tools import ToolServer  # only a run that serves its agent's tools pays for it

    try:
        server = ToolServer(*serving.address, serving.advertised)
    except OSError as exc:
        where = f"{TOOL_SERVER_HOST.var}: cannot serve tools on {':'.join(map(str, serving.address))}"
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    names = {provider_name(tool.name): tool.name for tool in task_file.tools} if serving.safe_names else None
    return Served(server, {tool.name: tool for tool in task_file.tools}, names)


def _model_proxy(upstream: str, offline: bool) -> ModelProxy:
    """The run's model proxy, started on 127.0.0.1 (a free port): only a run that proxies its agent's model calls."""
    from harness.serving.models import ModelProxy

    return ModelProxy(upstream, offline=offline)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if HandingOn.now and not INTERRUPTED.is_set():  # heard once the result is handed on whole; a second is not held
        INTERRUPTED.set()
        return
    INTERRUPTED.set()  # heard by the run's loop too, should the exception be lost in an import
    raise KeyboardInterrupt


def _unraisable(unraisable: Any) -> None:
    # A Ctrl-C that came while the interpreter ran a callback of its own (the importer's) cannot stop it there: the run
    # hears it through INTERRUPTED, and "Exception ignored ... KeyboardInterrupt" would only look like a crash.
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


if __name__ == "__main__":
    try:
        exit_code = main()
    except KeyboardInterrupt:  # a second Ctrl-C, after main() had decided
        exit_code = EXIT_INTERRUPTED
    finally:
        # A Ctrl-C while the interpreter winds down (it puts back the default handlers, which kill) must not turn the
        # exit code into a death by signal.
        for _signum in (_signal.SIGINT, *STOP_SIGNALS):
            _signal.signal(_signum, _signal.SIG_IGN)
    raise SystemExit(exit_code)
