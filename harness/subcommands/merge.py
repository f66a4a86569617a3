"""`eval_agent.py merge`: join the results of the shards of one run into one results file, and gate it."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from harness.config import Parser, parse_gate, writable_path
from harness.records import ConfigError, Tally
from harness.results import load_results, results_document
from harness.scoring import total_tokens, summarize


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="eval_agent.py merge",
        description="Join the results files of the shards of one run (--shard K/N) into one, and apply the gate.",
        epilog="Exit codes: 0 gate met, 1 gate not met, 2 unreadable or mismatched shards, 3 agent unreachable.",
    )
    parser.add_argument("results", nargs="+", metavar="RESULTS", help="the shards' results files")
    parser.add_argument("--out", metavar="FILE", required=True, help="the merged results file")
    parser.add_argument("--gate", metavar="PERCENT", help="the gate to apply (default: the shards' own)")
    parser.add_argument("--junit", metavar="FILE", help="also write JUnit XML")
    parser.add_argument("--summary-md", metavar="FILE", help="also append a Markdown summary (GITHUB_STEP_SUMMARY is used when set)")
    return parser


def merge_main(argv: Sequence[str]) -> int:
    """Check that the files are every shard of one run, exactly once, and publish the whole."""
    from eval_agent import EXIT_CONFIG, publish

    try:
        args = build_parser().parse_args(argv)
        shards = [load_results(path) for path in args.results]
        document, summary = merge(shards, args.results, parse_gate(args.gate, "--gate") if args.gate else None)
        summary_md = [writable_path(args.summary_md, "--summary-md")] if args.summary_md else []
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            summary_md.append(writable_path(os.environ["GITHUB_STEP_SUMMARY"], "GITHUB_STEP_SUMMARY"))
        results_path = writable_path(args.out, "--out")
        junit_path = writable_path(args.junit, "--junit") if args.junit else None
    except ConfigError as exc:
        print(f"eval_agent merge: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return publish(document, summary, results_path, junit_path, summary_md)


def merge(shards: Sequence[dict[str, Any]], paths: Sequence[str], gate: Decimal | None) -> tuple[dict[str, Any], Any]:
    """The merged document and its summary; ConfigError when the shards are not the whole of one run."""
    first, first_path = shards[0], paths[0]
    counts = set()
    seen: dict[str, str] = {}
    for doc, path in zip(shards, paths):
        if doc["fingerprint"] != first["fingerprint"]:
            raise ConfigError(f"{path}: its fingerprint differs from {first_path}'s: not shards of one run")
        shard = doc["manifest"]["selection"]["shard"]
        if shard is None:
            raise ConfigError(f"{path}: not a shard (it ran without --shard)")
        index, count = (int(part) for part in shard.split("/"))
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
    entries: dict[str, dict[str, Any]] = {}
    for doc, path in zip(shards, paths):
        for entry in doc["results"]:
            if entry["id"] in entries:
                raise ConfigError(f"{path}: task {entry['id']} is in two shards")
            entries[entry["id"]] = entry
    not_run = [task_id for doc in shards for task_id in doc["notRun"]]
    unaccounted = [task_id for task_id in order if task_id not in entries and task_id not in not_run]
    if unaccounted or len(entries) + len(not_run) != len(order):
        raise ConfigError(f"the shards do not cover the run: {', '.join(unaccounted) or 'tasks outside its selection'}")

    results = [entries[task_id] for task_id in order if task_id in entries]
    summary = summarize(
        [
            Tally(
                e["id"],
                e["category"],
                tuple(t["status"] for t in e["trialResults"]),
                e["blocking"],
                e["violation"] is not None,
                total_tokens([(t["usage"]["inputTokens"], t["usage"]["outputTokens"]) if t["usage"] else None for t in e["trialResults"]]),
                sum(t["durationMs"] for t in e["trialResults"]),
            )
            for e in results
        ],
        gate if gate is not None else Decimal(str(first["gate"])),
        runs=first["runs"],
        gate_on=first["gateOn"],
        not_run=len(not_run),
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
