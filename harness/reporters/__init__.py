"""Reports of a run, each rendered from its results document and verdict: console, JUnit XML, Markdown job summary,
the HTML page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.records import ConfigError, Outputs, Summary
from harness.reporters.console import say
from harness.results import render_json, write_atomic
from harness.text import headline

if TYPE_CHECKING:
    from harness.subcommands.compare import Comparison


def publish(
    document: Mapping[str, Any], summary: Summary, outputs: Outputs, comparison: Comparison | None = None
) -> None:
    """Write the results file and the reports asked for, then say the headline.

    Every report is rendered before any file is written: a bug in one leaves no file behind that claims a pass.
    """
    junit = markdown = page = ""
    if outputs.junit:
        from harness.reporters.junit import junit_xml

        junit = junit_xml(document)
    if outputs.summary_md:
        from harness.reporters.jobsummary import job_summary

        markdown = job_summary(document, summary, outputs.html)
    if outputs.html:
        from harness.reporters.page import html_report

        baseline = document.get("baseline", {}).get("path", "")
        page = html_report(document, comparison, baseline)
    write_atomic(outputs.results, render_json(document))
    if outputs.junit:
        write_atomic(outputs.junit, [junit])
    if outputs.html:
        write_atomic(outputs.html, [page])
    for path in outputs.summary_md:
        try:
            with open(path, "a", encoding="utf-8") as f:  # a job summary gathers the sections of every step
                f.write(markdown)
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    say(headline(summary))


def unreachable_reason(document: Mapping[str, Any]) -> str:
    """Why nothing was evaluated, from the first trial: the agent down, or our credentials or key rejected."""
    first = document["results"][0]["trialResults"][0]
    url = document["manifest"]["backendSettings"].get("url", document["manifest"]["backend"])
    reasons = {
        "reply:key-rejected": first["reason"],
        "reply:auth": f"{url} rejected the credentials: {first['reason']}",
    }
    return reasons.get(first["code"], f"could not reach {url}: {first['reason']}")
