"""Reports of a run, each rendered from its results document and verdict: console, JUnit XML, Markdown job summary,
the HTML page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.records import ConfigError, Outputs, Summary
from harness.reporters.console import say
from harness.results import Staged, commit, render_json, stage
from harness.text import headline

if TYPE_CHECKING:
    from harness.comparison import Comparison


def publish(
    document: Mapping[str, Any], summary: Summary, outputs: Outputs, comparison: Comparison | None = None
) -> None:
    """Write the results file and the reports asked for, then say the headline.

    Every report is written in full beside its target before any target is replaced: a bug in one leaves no file
    behind that claims a pass. Each is rendered as it is written, from the entries as they stream by.
    """
    staged: list[Staged] = []
    try:
        staged.append(stage(outputs.results, render_json(document)))
        if outputs.junit:
            from harness.reporters.junit import junit_xml

            staged.append(stage(outputs.junit, junit_xml(document)))
        if outputs.html:
            from harness.reporters.page import html_report

            baseline = document.get("baseline", {}).get("path", "")
            staged.append(stage(outputs.html, html_report(document, comparison, baseline)))
        markdown = ""
        if outputs.summary_md:
            from harness.reporters.jobsummary import job_summary

            markdown = job_summary(document, summary, outputs.html, outputs.results)
    except BaseException:
        for file in staged:
            file.discard()
        raise
    commit(staged)
    for path in outputs.summary_md:
        try:
            # A job summary gathers the sections of every step; a lone surrogate (an agent's) is written as its escape.
            with open(path, "a", encoding="utf-8", errors="backslashreplace") as f:
                f.write(markdown)
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    say(headline(summary))


def unreachable_reason(manifest: Mapping[str, Any], first: Mapping[str, Any]) -> str:
    """Why nothing was evaluated, from the first task's entry: the agent down, or our credentials or key rejected."""
    trial = first["trialResults"][0]
    url = manifest["backendSettings"].get("url", manifest["backend"])
    reasons = {
        "reply:key-rejected": trial["reason"],
        "reply:auth": f"{url} rejected the credentials: {trial['reason']}",
    }
    return reasons.get(trial["code"], f"could not reach {url}: {trial['reason']}")
