"""`eval_agent.py merge`: join the results of the shards of one run into one results file, and gate it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from harness.config import STEP_SUMMARY, percentage
from harness.flags import Parser
from harness.records import ConfigError, Outputs, Summary, Unreachable
from harness.reporters import publish, unreachable_reason
from harness.results import load_results, partial, results_document
from harness.settings import Sources, output_path
from harness.verdict import EXIT_UNREACHABLE, decide, tally


def main(argv: Sequence[str]) -> int:
    """Check that the files are every shard of one run, exactly once, and publish the whole with its verdict."""
    parser = Parser(
        prog="eval_agent.py merge",
        description="Join the results files of the shards of one run (--shard K/N) into one, and apply the gate.",
        epilog="Exit codes: 0 gate met, 1 gate not met, 2 unreadable, mismatched or partial shards (without "
        "--allow-partial), 3 agent unreachable, 4 a shard recorded an internal error.",
    )
    parser.add_argument("results", nargs="+", metavar="RESULTS", help="the shards' results files")
    parser.add_argument("--out", metavar="FILE", required=True, help="the merged results file")
    parser.add_argument("--gate", metavar="PERCENT", help="the gate to apply (default: the shards' own)")
    parser.add_argument("--junit", metavar="FILE", help="also write JUnit XML")
    parser.add_argument("--html", metavar="FILE", help="also write the HTML report")
    parser.add_argument(
        "--allow-partial", action="store_true", help="merge shards that were cut short (the gate then fails)"
    )
    parser.add_argument(
        "--summary-md", metavar="FILE", help="also append a Markdown summary (GITHUB_STEP_SUMMARY is used when set)"
    )
    args = parser.parse_args(argv)
    shards = [load_results(path) for path in args.results]
    gate = percentage(args.gate, "--gate") if args.gate else None
    document, summary = merge(shards, args.results, gate, args.allow_partial)
    summary_md = [output_path(args.summary_md, "--summary-md")] if args.summary_md else []
    step_summary = Sources(args, os.environ).get(STEP_SUMMARY)
    step_summary = step_summary and output_path(step_summary, STEP_SUMMARY.var)
    outputs = Outputs(
        output_path(args.out, "--out"),
        output_path(args.junit, "--junit") if args.junit else None,
        (*summary_md, *([step_summary] if step_summary else [])),
        output_path(args.html, "--html") if args.html else None,
    )
    publish(document, summary, outputs)
    if summary.exit_code == EXIT_UNREACHABLE:
        raise Unreachable(unreachable_reason(document["manifest"], document["results"][0]))
    return summary.exit_code


def merge(
    shards: Sequence[Mapping[str, Any]], paths: Sequence[str], gate: Decimal | None, allow_partial: bool = False
) -> tuple[dict[str, Any], Summary]:
    """The merged document and its verdict; ConfigError when the shards are not the whole of one run."""
    first, first_path = shards[0], paths[0]
    counts = set()
    seen: dict[str, str] = {}
    for doc, path in zip(shards, paths, strict=True):
        why = partial(doc)
        if why and not allow_partial:
            raise ConfigError(f"{path} is a partial run ({why}); merge it anyway with --allow-partial")
        if doc["fingerprint"] != first["fingerprint"]:
            raise ConfigError(f"{path}: its fingerprint differs from {first_path}'s: not shards of one run")
        shard = doc["manifest"]["selection"]["shard"]
        if shard is None:
            raise ConfigError(f"{path}: not a shard (it ran without --shard)")
        count = int(shard.split("/")[1])
        counts.add(count)
        if shard in seen:
            raise ConfigError(f"{path}: shard {shard} again (also {seen[shard]})")
        seen[shard] = path
    if len(counts) > 1:
        raise ConfigError(f"the shards come from different splits: {', '.join(sorted(seen))}")
    count = counts.pop()
    missing = [f"{k}/{count}" for k in range(1, count + 1) if f"{k}/{count}" not in seen]
    if missing:
        raise ConfigError(f"shard {', '.join(missing)} of {count} is missing")

    order = first["manifest"]["selection"]["taskIds"]
    entries: dict[str, Mapping[str, Any]] = {}
    for doc, path in zip(shards, paths, strict=True):
        for entry in doc["results"]:
            if entry["id"] in entries:
                raise ConfigError(f"{path}: task {entry['id']} is in two shards")
            entries[entry["id"]] = entry
    not_run = [task_id for doc in shards for task_id in doc["notRun"]]
    unaccounted = [task_id for task_id in order if task_id not in entries and task_id not in not_run]
    if unaccounted or len(entries) + len(not_run) != len(order):
        raise ConfigError(f"the shards do not cover the run: {', '.join(unaccounted) or 'tasks outside its selection'}")

    results = [entries[task_id] for task_id in order if task_id in entries]
    summary = decide(
        [tally(entry) for entry in results],
        gate if gate is not None else Decimal(str(first["gate"])),
        runs=first["runs"],
        gate_on=first["gateOn"],
        not_run=len(not_run),
        internal_error=next((doc["internalError"] for doc in shards if doc.get("internalError")), None),
    )
    manifest = dict(first["manifest"])
    manifest["selection"] = {**manifest["selection"], "shard": None, "mergedShards": count}
    document = results_document(
        run_id=first["runId"],
        fingerprint=first["fingerprint"],
        manifest=manifest,
        started_at=min(doc["startedAt"] for doc in shards),
        duration_ms=max(doc["durationMs"] for doc in shards),
        summary=summary,
        tasks=results,
        interrupted=any(doc["interrupted"] for doc in shards),
        not_run=[task_id for task_id in order if task_id in not_run],
    )
    return document, summary
