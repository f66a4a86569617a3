"""Reports of a run, each rendered from its results document and verdict: the results file, JUnit XML, the Markdown
job summary, the HTML page. The console (console.py) is the command's own: it says each task and the headline.

REPORTS declares each report once: the settings that ask for it (variable and flag) and the module that renders it.
A run and merge read where their reports go through `outputs()`, which checks every file before anything is sent or
written: never over a file the command reads, never two reports to one file; compare and report check theirs with
`check_outputs()`. `publish()` writes every report asked for.

Adding a report format: a module here with `render(document, summary, outputs, comparison) -> str | Iterable[str]`,
and one entry in REPORTS; a run and merge then take its flag and variable, and their --help shows them. The module is
imported only when its report is asked for, so that a run without it starts no slower: that is why its settings are
declared here, not in it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.records import ConfigError, Outputs, Summary, record
from harness.results import Staged, commit, stage
from harness.settings import Setting, Sources, output_path

if TYPE_CHECKING:
    from argparse import ArgumentParser

    from harness.comparison import Comparison

RESULTS = Setting(
    var="EVAL_RESULTS", flag="--out", help="the results file", default="eval-results.json", metavar="FILE"
)
JUNIT = Setting(var="EVAL_JUNIT", flag="--junit", help="also write JUnit XML", metavar="FILE")
HTML = Setting(
    var="EVAL_HTML", flag="--html", help="also write the HTML report, one self-contained page", metavar="FILE"
)
SUMMARY_MD = Setting(var="EVAL_SUMMARY_MD", flag="--summary-md", help="also append a Markdown summary", metavar="FILE")
STEP_SUMMARY = Setting(
    var="GITHUB_STEP_SUMMARY", flag=None, help="also append the Markdown summary here (GitHub Actions sets it)"
)
# A file a command reads: its path (None when not given), where it was given, and what it is ("the baseline").
Input = tuple[str | None, str, str]


@record
class Report:
    """One report: its name, the settings that name its files, the module whose render() writes it, and whether it
    is appended to its files (a job summary gathers the sections of every step) rather than replacing them."""

    name: str
    settings: tuple[Setting, ...]
    module: str
    appended: bool = False


REPORTS = (
    Report(name="results", settings=(RESULTS,), module="harness.reporters.resultsjson"),
    Report(name="junit", settings=(JUNIT,), module="harness.reporters.junit"),
    Report(name="html", settings=(HTML,), module="harness.reporters.page"),
    Report(name="summary", settings=(SUMMARY_MD, STEP_SUMMARY), module="harness.reporters.jobsummary", appended=True),
)
REPORT_SETTINGS = tuple(setting for report in REPORTS for setting in report.settings)


def outputs(sources: Sources, reads: Sequence[Input], command: str = "a run") -> Outputs:
    """Where each report asked for goes, every file checked by check_outputs; the results file always."""
    results, where = sources.text(RESULTS)
    if results == "":  # the other reports are optional: empty is none
        raise ConfigError(f"{where}: an empty file name")
    files = {
        report.name: tuple(path for setting in report.settings if (path := sources.get(setting))) for report in REPORTS
    }
    check_outputs(
        [(path, sources.text(setting)[1]) for setting in REPORT_SETTINGS if (path := sources.get(setting))],
        reads,
        command,
    )
    return Outputs({name: paths for name, paths in files.items() if paths})


def check_outputs(writes: Sequence[tuple[str, str]], reads: Sequence[Input], command: str) -> None:
    """Each file written, given as (path, where), may be written, is none of the files read and no other file written;
    else ConfigError naming where it was given."""
    read = {os.path.realpath(path): (where, what) for path, where, what in reads if path}
    written: dict[str, str] = {}  # the real path -> where it was given
    for path, where in writes:
        output_path(path, where)
        real = os.path.realpath(path)
        if real in read:
            given, what = read[real]
            raise ConfigError(f"{where}: {path} is {what} ({given}); {command} never writes over what it reads")
        if real in written:
            raise ConfigError(f"{where}: {path} is also {written[real]}; each report needs a file of its own")
        written[real] = where


def add_report_flags(parser: ArgumentParser, results_help: str) -> None:
    """A flag for every report's setting that has one, as a run has them; the results file's is required."""
    for report in REPORTS:
        ambient = [setting.var for setting in report.settings if setting.flag is None]
        used = f" ({', '.join(ambient)} is used too, when set)" if ambient else ""
        for setting in report.settings:
            if setting.flag is None:
                continue
            parser.add_argument(
                setting.flag,
                metavar=setting.metavar,
                required=setting is RESULTS,
                help=results_help if setting is RESULTS else f"{setting.help}{used}",
            )


def subcommand_sources(args: Any, environ: Mapping[str, str]) -> Sources:
    """The reports a subcommand was asked for: its flags, and the variables of the settings that have no flag
    (GITHUB_STEP_SUMMARY); the other variables are a run's, not a subcommand's."""
    ambient = {setting.var for setting in REPORT_SETTINGS if not setting.flag}
    return Sources(args, {name: value for name, value in environ.items() if name in ambient})


def publish(
    document: Mapping[str, Any], summary: Summary, outputs: Outputs, comparison: Comparison | None = None
) -> None:
    """Write every report asked for.

    Every report is written in full beside its target before any target is replaced: a bug in one leaves no file
    behind that claims a pass. Each is rendered as it is written, from the entries as they stream by.
    """
    staged: list[Staged] = []
    appended: list[tuple[tuple[str, ...], str]] = []
    try:
        for report in REPORTS:
            paths = outputs.of(report.name)
            if not paths:
                continue
            render = importlib.import_module(report.module).render
            if report.appended:
                appended.append((paths, "".join(render(document, summary, outputs, comparison))))
            else:
                staged.extend(stage(path, render(document, summary, outputs, comparison)) for path in paths)
    except BaseException:
        for file in staged:
            file.discard()
        raise
    commit(staged)
    for paths, text in appended:
        for path in paths:
            _append(path, text)


def _append(path: str, text: str) -> None:
    try:
        # A lone surrogate (an agent's) is written as its escape.
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


def unreachable_reason(manifest: Mapping[str, Any], first: Mapping[str, Any]) -> str:
    """Why nothing was evaluated, from the first task's entry: the agent down, or our credentials or key rejected."""
    trial = first["trialResults"][0]
    url = manifest["backendSettings"].get("url", manifest["backend"])
    reasons = {
        "reply:key-rejected": trial["reason"],
        "model:unreachable": trial["reason"],
        "reply:auth": f"{url} rejected the credentials: {trial['reason']}",
    }
    return reasons.get(trial["code"], f"could not reach {url}: {trial['reason']}")
