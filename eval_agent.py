"""Evaluate a tool-using agent against canonical tasks and gate the release on its pass-rate."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from backends import BACKENDS
from harness.config import Config, parse_config
from harness.reporters.console import Console, Progress, say
from harness.manifest import fingerprint, run_manifest
from harness.records import AgentSurface, ConfigError, Summary, Tally, Task, TaskResult
from harness.results import load_results, render_json, results_document, summary_fields, summary_line, task_entry, write_atomic
from harness.running import group_trials, run_jobs
from harness.scoring import total_tokens, summarize
from harness.selection import select_tasks, shard_of
from harness.taskfile import load_task_file

# Error codes that mean the agent was never really asked: if every trial ends in one, exit 3.
UNREACHABLE = {"reply:connect", "reply:tls", "reply:auth", "reply:key-rejected"}
EXIT_GATE_MET, EXIT_GATE_FAILED, EXIT_CONFIG, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def main(argv: Sequence[str] | None = None) -> int:
    """Load, select, run, score, report, gate; or one of the subcommands: merge, compare, validate, tools."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["merge"]:
        from harness.subcommands.merge import merge_main

        return merge_main(argv[1:])
    if argv[:1] == ["compare"]:
        from harness.subcommands.compare import compare_main

        return compare_main(argv[1:])
    if argv[:1] in (["validate"], ["tools"]):
        from harness.subcommands.authoring import tools_main, validate_main

        return (validate_main if argv[0] == "validate" else tools_main)(argv[1:])
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        config = parse_config(argv, os.environ)
        task_file = load_task_file(config.tasks_path)
        selected = select_tasks(task_file.tasks, config.task_globs, config.category_globs)
        tasks = shard_of(selected, *config.shard) if config.shard else selected
        surface = AgentSurface(task_file.tools, config.system_prompt or task_file.system)
        backend = BACKENDS[config.backend](config, surface)
        baseline = load_results(config.baseline_path) if config.baseline_path else None
    except ConfigError as exc:
        print(f"eval_agent: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED

    settings = backend.describe()
    where = f" at {settings['url']}" if "url" in settings else ""
    plan = f"{len(tasks)} of {len(task_file.tasks)} tasks from {task_file.path}"
    plan += f" × {config.runs} runs" if config.runs > 1 else ""
    plan += f" (shard {config.shard[0]}/{config.shard[1]})" if config.shard else ""
    if config.dry_run:
        return dry_run(config, tasks, f"{plan} on backend {config.backend}{where}", settings)
    manifest = run_manifest(config, task_file, selected, settings, surface.system)
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    say(f"{plan} on backend {config.backend}{where}")

    jobs = [task for task in tasks for _ in range(config.runs)]
    console = Console(tasks, config.runs, Progress(len(jobs), sys.stderr))
    results, interrupted = run_jobs(backend, jobs, config.concurrency, console.on_result)
    # The results are in: a late Ctrl-C must not leave them unwritten.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    console.finish()
    task_results = group_trials(tasks, results)
    ran = {task_result.task.id for task_result in task_results}
    summary = summarize(
        tallies(task_results), config.gate, runs=config.runs, gate_on=config.gate_on, not_run=len(tasks) - len(ran)
    )
    document = results_document(
        run_id=config.run_id,
        fingerprint=fingerprint(manifest, selected),
        manifest=manifest,
        started_at=started_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        duration_ms=(time.perf_counter() - started) * 1000,
        summary=summary,
        tasks=[task_entry(task_result) for task_result in task_results],
        interrupted=interrupted,
        not_run=[task.id for task in tasks if task.id not in ran],
    )
    comparison = None
    if baseline is not None:
        from harness.subcommands.compare import compare

        # A regression against the baseline fails the gate whatever the pass-rate.
        comparison = compare(baseline, document)
        if comparison.regressed:
            summary = dataclasses.replace(summary, gate_passed=False, regressed=tuple(comparison.regressed))
            document = {**document, **summary_fields(summary)}
        document["baseline"] = {"path": config.baseline_path, "runId": baseline["runId"], "fingerprint": baseline["fingerprint"]}
    code = publish(document, summary, config.results_path, config.junit_path, config.summary_md_paths)
    if comparison is not None:
        from harness.subcommands.compare import render

        for line in render(comparison, config.baseline_path or "", config.results_path):
            say(line)
    if interrupted and code != EXIT_CONFIG:
        print(f"eval_agent: interrupted after {len(results)} of {len(jobs)} trials", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


def tallies(task_results: Sequence[TaskResult]) -> list[Tally]:
    """What summarize counts, per task."""
    return [
        Tally(
            tr.task.id,
            tr.task.category,
            tuple(trial.outcome.status for trial in tr.trials),
            blocking=tr.task.blocking,
            violation=any(trial.outcome.violation for trial in tr.trials),
            tokens=total_tokens([trial.reply.usage for trial in tr.trials]),
            latency_ms=sum(trial.duration_ms for trial in tr.trials),
        )
        for tr in task_results
    ]


def publish(
    document: Mapping[str, Any], summary: Summary, results_path: str, junit_path: str | None, summary_md_paths: Sequence[str]
) -> int:
    """Write the results file and the reports asked for, print the summary line, and return the exit code."""
    try:
        write_atomic(results_path, render_json(document))
        if junit_path:
            from harness.reporters.junit import junit_xml

            write_atomic(junit_path, [junit_xml(document)])
        for path in summary_md_paths:
            from harness.reporters.jobsummary import job_summary

            with open(path, "a", encoding="utf-8") as f:
                f.write(job_summary(document))
    except OSError as exc:
        print(f"eval_agent: error: cannot write {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_CONFIG
    say(summary_line(summary))
    codes = [trial["code"] for entry in document["results"] for trial in entry["trialResults"]]
    if codes and all(code in UNREACHABLE for code in codes):
        first = document["results"][0]["trialResults"][0]
        url = document["manifest"]["backendSettings"].get("url", document["manifest"]["backend"])
        lines = {"reply:key-rejected": first["reason"], "reply:auth": f"{url} rejected the credentials: {first['reason']}"}
        line = lines.get(first["code"], f"could not reach {url}: {first['reason']}")
        print(f"eval_agent: error: {line}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return EXIT_GATE_MET if document["gatePassed"] else EXIT_GATE_FAILED


def dry_run(config: Config, tasks: Sequence[Task], plan: str, settings: Mapping[str, Any]) -> int:
    """List what a run would do, with the backend's settings (secrets masked), and send nothing."""
    say(f"dry run: {plan}")
    shown = ", ".join(f"{key} {value}" for key, value in settings.items() if key != "url")
    say(f"settings: concurrency {config.concurrency}, gate {config.gate}% on {config.gate_on}{', ' + shown if shown else ''}")
    width = max(len(task.id) for task in tasks)
    for task in tasks:
        expect = task.expect
        wanted = f"{expect.tool}({', '.join(expect.required_args)})" if hasattr(expect, "tool") else "a refusal"
        say(f"  {task.id:<{width}}  {task.category}  expects {wanted}")
    say("nothing was sent")
    return EXIT_GATE_MET


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    raise SystemExit(main())
