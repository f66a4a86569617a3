"""`eval_agent.py merge`: join the results of the shards of one run into one results file, and gate it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from harness.comparison import Comparison, compare, recorded_limits, render
from harness.config import percentage
from harness.costs import require_tokens
from harness.flags import Parser
from harness.records import ConfigError, Summary, Unreachable
from harness.reporters import (
    Input,
    add_report_flags,
    outputs,
    publish,
    subcommand_sources,
    unreachable_reason,
)
from harness.reporters.console import say
from harness.results import baseline_record, file_sha256, load_results, partial, results_document
from harness.text import canonical_json, clip, headline, percent
from harness.verdict import EXIT_UNREACHABLE, decide_document


def main(argv: Sequence[str]) -> int:
    """Check that the files are every shard of one run, exactly once, and publish the whole with its verdict."""
    parser = Parser(
        prog="eval_agent.py merge",
        description="Join the results files of the shards of one run (--shard K/N) into one, and apply the gate.",
        epilog="Exit codes: 0 gate met, 1 gate not met, 2 unreadable, mismatched or partial shards (without "
        "--allow-partial), 3 agent unreachable, 4 a shard recorded an internal error.",
    )
    parser.add_argument("results", nargs="+", metavar="RESULTS", help="the shards' results files")
    add_report_flags(parser, "the merged results file")
    parser.add_argument("--gate", metavar="PERCENT", help="the gate to apply (default: the shards' own)")
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="compare the merged run with this results file (default: the baseline the shards were compared with)",
    )
    parser.add_argument(
        "--allow-partial", action="store_true", help="merge shards that were cut short (the gate then fails)"
    )
    args = parser.parse_args(argv)
    shards = [load_results(path) for path in args.results]
    reads: list[Input] = [(path, "RESULTS", "a shard") for path in args.results]
    recorded = shards[0].get("baseline")
    if args.baseline is not None:
        reads.append((args.baseline, "--baseline", "the baseline"))
    elif isinstance(recorded, dict) and isinstance(recorded.get("path"), str):
        reads.append((recorded["path"], f"{args.results[0]}'s baseline.path", "the baseline"))
    written = outputs(subcommand_sources(args, os.environ), reads, "merge")
    gate = percentage(args.gate, "--gate") if args.gate else None
    document, summary, comparison = merge(shards, args.results, gate, args.allow_partial, args.baseline)
    publish(document, summary, written, comparison)
    say(headline(summary))
    if comparison is not None:
        for line in render(comparison, document["baseline"]["path"], args.out):
            say(line)
    if summary.exit_code == EXIT_UNREACHABLE:
        raise Unreachable(unreachable_reason(document["manifest"], document["results"][0]))
    return summary.exit_code


def merge(
    shards: Sequence[Mapping[str, Any]],
    paths: Sequence[str],
    gate: Decimal | None,
    allow_partial: bool = False,
    baseline_path: str | None = None,
) -> tuple[dict[str, Any], Summary, Comparison | None]:
    """The merged document, its verdict and its comparison with the baseline (the one given, else the one the shards
    were compared with, if any); ConfigError when the shards are not the whole of one run."""
    first, first_path = shards[0], paths[0]
    counts = set()
    seen: dict[str, str] = {}
    for doc, path in zip(shards, paths, strict=True):
        why = partial(doc)
        if why and not allow_partial:
            raise ConfigError(f"{path} is a partial run ({why}); merge it anyway with --allow-partial")
        for label, (mine, theirs) in _agreement(doc, first, gate is None).items():
            if mine != theirs:
                raise ConfigError(
                    f"{path}: its {label} ({_describe(label, mine)}) differs from {first_path}'s"
                    f" ({_describe(label, theirs)}): not shards of one run"
                )
        if doc["fingerprint"] != first["fingerprint"]:  # what is left: the selected tasks' definitions
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
    not_run = [task_id for task_id in order if task_id in not_run]
    manifest = dict(first["manifest"])
    manifest["selection"] = {**manifest["selection"], "shard": None, "mergedShards": count}
    paced = [doc["manifest"]["rateLimits"] for doc in shards if "rateLimits" in doc["manifest"]]
    if paced:
        manifest["rateLimits"] = _rate_limits(paced)
    baseline = _baseline(first.get("baseline"), baseline_path, first_path)
    merged = {
        "manifest": manifest,
        "runs": first["runs"],
        **({"adaptive": first["adaptive"]} if "adaptive" in first else {}),  # its settings; its figures counted again
        "results": results,
        "notRun": not_run,
        "gate": first["gate"],
        "gateOn": first["gateOn"],
        "internalError": next((doc["internalError"] for doc in shards if doc.get("internalError")), None),
        # what no task entry says: a shard the rate limits stopped
        "gateFailedBecause": ["rate-limited"]
        if any("rate-limited" in doc["gateFailedBecause"] for doc in shards)
        else [],
    }
    comparison = None
    if baseline is not None:
        limits = recorded_limits(first)
        if "tokens" in limits:
            require_tokens(baseline[0], baseline[1], f"{first_path}'s growth.tokens.limit")
        comparison = compare(baseline[1], merged, limits)
    against = (
        ([*comparison.regressed, *comparison.quarantined_regressed], comparison.overall_regressed, comparison.growth)
        if comparison
        else ((), False, ())
    )
    summary = decide_document(merged, gate, against)
    document = results_document(
        run_id=first["runId"],
        fingerprint=first["fingerprint"],
        manifest=manifest,
        started_at=min(doc["startedAt"] for doc in shards),
        duration_ms=max(doc["durationMs"] for doc in shards),
        summary=summary,
        tasks=results,
        interrupted=any(doc["interrupted"] for doc in shards),
        not_run=not_run,
        baseline=baseline_record(*baseline) if baseline is not None else None,
    )
    return document, summary, comparison


def _rate_limits(paced: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The whole run's rate limits, from the shards' that record them: their 429s and waits summed, the highest peak
    and the lowest final concurrency (each shard paced its own requests)."""
    return {
        "rateLimited": sum(shard["rateLimited"] for shard in paced),
        "waitedMs": round(sum(shard["waitedMs"] for shard in paced), 1),
        "peakConcurrency": max(shard["peakConcurrency"] for shard in paced),
        "finalConcurrency": min(shard["finalConcurrency"] for shard in paced),
    }


def _agreement(doc: Mapping[str, Any], first: Mapping[str, Any], same_gate: bool) -> dict[str, tuple[Any, Any]]:
    """What shards of one run share, named (the gate too, unless merge sets its own): label -> the shard's and the
    first shard's."""

    def shared(doc: Mapping[str, Any]) -> dict[str, Any]:
        manifest, baseline = doc["manifest"], doc.get("baseline")
        selection, task_file = manifest["selection"], manifest.get("taskFile")
        task_file = task_file if isinstance(task_file, dict) else {}
        return {
            "number of runs": doc["runs"],
            "--runs auto": manifest.get("adaptive"),
            "backend": manifest["backend"],
            "backend settings": manifest["backendSettings"],
            "system prompt": manifest.get("systemPromptSha256"),
            "tool surface": task_file.get("toolsSha256"),
            **({"gate": doc["gate"]} if same_gate else {}),
            "gate-on": doc["gateOn"],
            "task file": task_file.get("sha256"),
            "selection": (selection.get("task") or [], selection.get("category") or []),
            "baseline": (baseline.get("path"), baseline.get("sha256")) if isinstance(baseline, dict) else None,
            "growth limit": recorded_limits(doc),
        }

    mine, theirs = shared(doc), shared(first)
    settings = mine["backend settings"], theirs["backend settings"]
    if all(isinstance(value, dict) for value in settings):
        # Only the settings that differ, so that the refusal shows them rather than a long list that is cut.
        keys = sorted(key for key in {*settings[0], *settings[1]} if settings[0].get(key) != settings[1].get(key))
        mine["backend settings"], theirs["backend settings"] = ({key: one.get(key) for key in keys} for one in settings)
    return {label: (mine[label], theirs[label]) for label in mine}


def _describe(label: str, value: Any) -> str:
    """A value _agreement compares, as the refusal says it."""
    if label == "gate":
        return f"{value:g}%"
    if label in ("task file", "tool surface", "system prompt"):
        return f"SHA-256 {_short(value)}" if value is not None else "none"
    if label == "backend settings":
        return clip(canonical_json(value), 80)  # masked already, as the manifest keeps them
    if label == "selection":
        flags = [f"--task {glob}" for glob in value[0]] + [f"--category {glob}" for glob in value[1]]
        return " ".join(flags) or "all tasks"
    if label == "growth limit":
        return ", ".join(f"{figure} {percent(limit, 10)}%" for figure, limit in value.items()) or "none"
    if label == "--runs auto":
        return "off" if value is None else ", ".join(f"{key} {number:g}" for key, number in value.items())
    if label == "baseline":
        return "none" if value is None else f"{value[0]}, SHA-256 {_short(value[1])}"
    return str(value)


def _short(sha256: Any) -> str:
    return f"{sha256[:12]}…" if isinstance(sha256, str) else str(sha256)


def _baseline(recorded: Any, given: str | None, first_path: str) -> tuple[str, dict[str, Any]] | None:
    """The baseline to compare the merged run with, and its path: the one given, else the one the shards recorded
    (checked to be the same bytes); None when there is neither."""
    if given is not None:
        path = given
    elif recorded is None:
        return None
    else:
        if not isinstance(recorded, dict) or not isinstance(recorded.get("path"), str):
            raise ConfigError(f"{first_path}: baseline.path: expected a string")
        path = recorded["path"]
        try:
            sha256 = file_sha256(path)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (the baseline the shards were compared with; give it with --baseline)") from None
        if sha256 != recorded.get("sha256"):
            raise ConfigError(
                f"{path}: not the baseline the shards were compared with (its SHA-256 differs); give that one with"
                " --baseline"
            )
    baseline = load_results(path)
    if partial(baseline):
        raise ConfigError(f"{path}: a partial run ({partial(baseline)}) cannot be a baseline")
    return path, baseline
