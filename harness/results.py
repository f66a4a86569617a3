"""The results document, the source of truth every report renders: task entries, the document, load, atomic write."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

from harness.files import read_input
from harness.records import (
    ConfigError,
    EndState,
    Figure,
    Growth,
    ModelCall,
    Quarantine,
    Quarantined,
    Result,
    Summary,
    Task,
    ToolCall,
    ToolResult,
    Turn,
)
from harness.text import count, expected_text, json_encoder, sha256_hex, utc_today

RESULTS_SCHEMA_VERSION = 2
NON_FINITE = "nonFinite"  # in an object of the results file: where its NaN and infinities were written as strings
# The temporary files of a write and of a run's entries: .eval-<pid>-<12 hex>.tmp, .eval-entries-<pid>-<12 hex>.jsonl.
# Compiled (and cached by re) when a folder first holds a name that starts so, not by every run.
LEFTOVER = r"\.eval-(?:entries-)?([1-9][0-9]{0,9})-[0-9a-f]{12}\.(?:tmp|jsonl)"
STARTED = time.time()
# 1 GiB: over a million trials (a trial takes under 1 KB); json holds what it reads several times over in memory.
MAX_RESULTS_BYTES = 1 << 30
STATE_LIMIT = 64 * 1024  # characters of an environment's final state a trial's record keeps
CONVERSATION_TEXT_LIMIT = 2000  # characters of each message, text and result a conversation record keeps


def task_entry(task: Task, trials: Sequence[Result], today: str | None = None) -> dict[str, Any]:
    """A task's entry in the results file: what it expects, its verdict over all its trials, then each trial.

    today: the day the run started (UTC, YYYY-MM-DD), on which its quarantine, if any, is active or not.
    """
    statuses = [trial.outcome.status for trial in trials]
    passes = statuses.count("pass")
    trial_entries = [_trial_entry(trial) for trial in trials]
    miss = explaining_trial(trial_entries) if passes < len(trials) else None
    return {
        "id": task.id,
        "category": task.category,
        "sha256": task.sha256,
        "blocking": task.blocking,
        **({"budget": task.budget.written()} if task.budget is not None else {}),
        **({"quarantine": _quarantine(task.quarantine, today or utc_today())} if task.quarantine else {}),
        "expected": expected_text(task),
        "prompt": task.prompt,
        "status": "pass" if passes == len(trials) else "fail" if "fail" in statuses else "error",
        "code": miss["code"] if miss else None,
        "reason": miss["reason"] if miss else None,
        "violation": next((trial.outcome.violation for trial in trials if trial.outcome.violation), None),
        "passes": passes,
        "trials": len(trials),
        "flaky": 0 < passes < len(trials),
        "trialResults": trial_entries,
    }


def _quarantine(held: Quarantine, today: str) -> dict[str, Any]:
    return {"until": held.until, "reason": held.reason, "issue": held.issue, "active": held.active(today)}


def explaining_trial(trials: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The trial that explains a task's non-pass: its first wrong answer, else its first error; None when all passed."""
    misses = [trial for trial in trials if trial["status"] != "pass"]
    return next((trial for trial in misses if trial["status"] == "fail"), misses[0] if misses else None)


def _trial_entry(result: Result) -> dict[str, Any]:
    reply = result.reply
    stated = reply.refusal_stated or reply.refused_by_provider is not None
    entry: dict[str, Any] = {
        "status": result.outcome.status,
        "code": result.outcome.code,
        "reason": result.outcome.reason,
        "violation": result.outcome.violation,
        "toolCalls": _calls(reply.tool_calls),
        # Refused only when it was said: by the provider (a filter, a refusal stop) or by the agent (refused: true).
        # A provider's model answering in words is counted as refused by the refusal rule, but it is an answer.
        "refused": stated,
        "refusedBy": "provider" if reply.refused_by_provider else "model" if stated else None,
        **({"refusalReason": reply.refused_by_provider} if reply.refused_by_provider else {}),
        "text": reply.text,
        "attempts": reply.attempts,
        "durationMs": round(result.duration_ms, 1),
        "usage": {"inputTokens": reply.usage[0], "outputTokens": reply.usage[1]} if reply.usage else None,
        "turns": 1,
        "steps": 1,
    }
    if result.turns:
        entry["turns"] = len(result.turns)
        entry["steps"] = sum(len(turn.steps) for turn in result.turns) or 1
        if result.conversation_id:
            entry["conversationId"] = result.conversation_id
        entry["conversation"] = [_turn_entry(turn) for turn in result.turns]
        unscripted = {
            r.call.name: None for turn in result.turns for step in turn.steps for r in step.results if not r.answered
        }
        entry["unscripted"] = list(unscripted)
    if result.end is not None:
        entry.update(_end_entry(result.end))
    if result.model_calls is not None:
        entry["modelCalls"] = _model_calls(result.model_calls)
        if result.reported_usage is not None:
            entry["reportedUsage"] = {"inputTokens": result.reported_usage[0], "outputTokens": result.reported_usage[1]}
    return entry


def _model_calls(calls: Sequence[ModelCall]) -> dict[str, Any]:
    """What the model proxy saw of a trial's model calls: how many, the models, the tokens (null unless every answered
    call said its own), the time they took, and each call."""
    from harness.proxied import proxied_usage

    usage = proxied_usage(calls)
    return {
        "count": len(calls),
        "models": list(dict.fromkeys(call.model for call in calls if call.model)),
        "inputTokens": usage and usage[0],
        "outputTokens": usage and usage[1],
        "latencyMs": round(sum(call.latency_ms for call in calls), 1),
        "calls": [
            {
                "format": call.form,
                "model": call.model,
                "status": call.status,
                "inputTokens": call.input_tokens,
                "outputTokens": call.output_tokens,
                "latencyMs": call.latency_ms,
                **({"error": call.error} if call.error else {}),
            }
            for call in calls
        ],
    }


def _end_entry(end: EndState, key: str = "finalState") -> dict[str, Any]:
    """An environment's state as the results keep it (the final one, or a turn's as key): whole, or its JSON text
    cut to STATE_LIMIT with the key's Cut; the reference state's SHA-256 when it was held to one."""
    text = json.dumps(end.state, ensure_ascii=False)
    entry: dict[str, Any] = (
        {key: end.state} if len(text) <= STATE_LIMIT else {key: text[: STATE_LIMIT - 3] + "...", f"{key}Cut": True}
    )
    if end.reference_sha256 is not None:
        entry["referenceStateSha256"] = end.reference_sha256
    return entry


def _calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """Each call by its tool's name, and the name the agent reported when it was read as that tool's."""
    return [
        {"name": call.name, "args": call.args}
        if call.reported_name is None
        else {"name": call.name, "args": call.args, "reportedName": call.reported_name}
        for call in calls
    ]


def _turn_entry(turn: Turn) -> dict[str, Any]:
    """A turn as the results keep it: the user's message, then each step's calls, text and the results played back;
    its verdict, for a task that judges its turns, and the state it ended in, for a turn that checks it."""
    steps = []
    for step in turn.steps:
        reply = step.reply
        entry: dict[str, Any] = {"toolCalls": _calls(reply.tool_calls), "text": _cut(reply.text)}
        if step.results:
            entry["results"] = [_result_entry(result) for result in step.results]
        if reply.error_code is not None:
            entry["error"] = f"{reply.error_code}: {reply.error}"
        steps.append(entry)
    entry = {"user": _cut(turn.user), "steps": steps}
    if turn.verdict is not None:
        entry["verdict"] = {"status": turn.verdict.status, "code": turn.verdict.code, "reason": turn.verdict.reason}
    return entry if turn.end is None else {**entry, **_end_entry(turn.end, "state")}


def _result_entry(result: ToolResult) -> dict[str, Any]:
    """A played-back result as the results keep it: the tool, the result, and where it came from."""
    entry = {
        "name": result.call.name,
        "result": _cut_json(result.content),
        "scripted": result.scripted,
        "source": result.source,
    }
    if result.case is not None:
        entry["case"] = result.case
    if result.unreported:  # the tool server answered it, and the agent's reply left it out
        entry["unreported"] = True
    return entry


def _cut(text: str | None) -> str | None:
    """A text of the conversation record, cut to CONVERSATION_TEXT_LIMIT characters (ending in `...` when cut)."""
    if text is None or len(text) <= CONVERSATION_TEXT_LIMIT:
        return text
    return text[: CONVERSATION_TEXT_LIMIT - 3] + "..."


def _cut_json(value: Any) -> Any:
    """A played-back result as it was, or, when its JSON text is over the limit, that text cut."""
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False)
        return value if len(text) <= CONVERSATION_TEXT_LIMIT else _cut(text)
    return value


def summary_fields(summary: Summary) -> dict[str, Any]:
    """The verdict part of the results file, alike for a run and a merge."""
    return {
        "passed": summary.passed,
        "failed": summary.failed,
        "errored": summary.errored,
        "total": summary.total,
        "passRate": round(float(summary.rate), 4),
        "gate": float(summary.gate),
        "gateOn": summary.gate_on,
        "gatePassed": summary.gate_passed,
        "gateFailedBecause": list(summary.gate_failed_because),
        "internalError": summary.internal_error,
        "runs": summary.runs,
        "passAllK": {str(k): round(float(value) * 100, 4) for k, value in summary.pass_all_k.items()},
        **({"passAll": round(float(summary.all_passed) * 100, 4)} if summary.all_passed is not None else {}),
        **({"adaptive": dict(summary.adaptive)} if summary.adaptive is not None else {}),
        "flaky": list(summary.flaky),
        "blockingFailed": list(summary.blocking_failed),
        "violations": list(summary.violations),
        "replayMissed": list(summary.replay_missed),
        "overBudget": summary.over_budget,
        "regressed": list(summary.regressed),
        **({"quarantined": _quarantined(summary.quarantined)} if summary.quarantined else {}),
        **({"growth": growth_document(summary.growth)} if summary.growth else {}),
        "usage": {
            "inputTokens": summary.tokens[0],
            "outputTokens": summary.tokens[1],
            "latencyMs": round(summary.latency_ms, 1),
        }
        if summary.tokens
        else None,
        "byCategory": {
            name: {
                "passed": c.passed,
                "total": c.total,
                **({"passRate": round(float(c.rate), 4)} if c.task_rate is not None else {}),
            }
            for name, c in summary.by_category.items()
        },
    }


def _quarantined(held: Quarantined) -> dict[str, Any]:
    """The tasks out of the gate, counted apart, as the results file keeps them."""
    return {
        "tasks": list(held.tasks),
        "passed": held.passed,
        "failed": held.failed,
        "errored": held.errored,
        "total": held.total,
        "passAllK": {str(k): round(float(value) * 100, 4) for k, value in held.pass_all_k.items()},
        "flaky": list(held.flaky),
        "regressed": list(held.regressed),
        "violations": list(held.violations),
    }


def growth_document(growth: Iterable[Growth]) -> dict[str, Any]:
    """Each figure a growth limit applies to, against the baseline, as the results file and `compare --out` keep it."""
    return {
        g.figure: {
            "then": as_float(g.then),
            "now": as_float(g.now),
            "percent": rounded_percent(g.percent),
            "limit": None if g.limit is None else float(g.limit),
            "exceeded": g.exceeded,
            "tasks": g.tasks,
        }
        for g in growth
    }


def as_float(figure: Figure | None) -> float | None:
    """A cost figure as the files keep it."""
    return None if figure is None else float(figure)


def rounded_percent(value: Fraction | None) -> float | None:
    """A change in percent as the files keep it: to 4 decimals."""
    return None if value is None else round(float(value), 4)


def results_document(
    *,
    run_id: str,
    fingerprint: str,
    manifest: Mapping[str, Any],
    started_at: str,
    duration_ms: float,
    summary: Summary,
    tasks: Sequence[Mapping[str, Any]] | Spool,
    interrupted: bool,
    not_run: Sequence[str],
    baseline: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The results file's content: the source of truth every other report renders."""
    return {
        "schemaVersion": RESULTS_SCHEMA_VERSION,
        "runId": run_id,
        "fingerprint": fingerprint,
        "manifest": dict(manifest),
        "startedAt": started_at,
        "durationMs": round(duration_ms, 1),
        "interrupted": interrupted,
        "notRun": list(not_run),
        **summary_fields(summary),
        **({"baseline": dict(baseline)} if baseline is not None else {}),
        "results": tasks if isinstance(tasks, Spool) else list(tasks),
    }


def baseline_record(path: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """What a results file records of the baseline it was compared with: its path, the SHA-256 of its bytes, its run."""
    return {
        "path": path,
        "sha256": file_sha256(path),
        "runId": document["runId"],
        "fingerprint": document["fingerprint"],
    }


def file_sha256(path: str) -> str:
    """The SHA-256 of a file's bytes; a ConfigError naming the file when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return sha256_hex(f.read())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def partial(document: Mapping[str, Any]) -> str | None:
    """Why a results document is not the whole of its run (`interrupted, 7 tasks not run`); None when it is whole."""
    why = (["interrupted"] if document["interrupted"] else []) + (
        [f"{count(len(document['notRun']), 'task')} not run"] if document["notRun"] else []
    )
    return ", ".join(why) or None


def load_results(path: str, max_bytes: int = MAX_RESULTS_BYTES) -> dict[str, Any]:
    """A results file, checked whole; a ConfigError naming the first thing that makes it not one."""
    raw = read_input(path, max_bytes, f"over the {max_bytes} bytes a results file may have")
    try:
        document = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not JSON this harness reads: nested too deeply") from None
    except ValueError:  # what int() refuses: more digits than sys.get_int_max_str_digits()
        raise ConfigError(f"{path}: not JSON this harness reads: an integer too long to read as a number") from None
    if not isinstance(document, dict) or document.get("schemaVersion") != RESULTS_SCHEMA_VERSION:
        raise ConfigError(f"{path}: not a results file of schema version {RESULTS_SCHEMA_VERSION}")
    from harness.readback import problem_in  # what a results file must hold: only a run that reads one builds it

    problem = problem_in(document)
    if problem is not None:
        raise ConfigError(f"{path}: {problem}")
    return document


def render_json(document: Mapping[str, Any]) -> Iterator[str]:
    """The document in pieces, indented at the top level, one line per entry of a list or object.

    Readable and greppable; fast, as json's indent= runs the pure-Python encoder, several times
    slower on 10,000 results; and in pieces, so that a large file is never held twice in memory.
    Strict JSON whatever an agent sent: see finite_json.
    """
    marked: list[str] = []  # the top level's numbers written as strings; a task entry lists its own
    yield "{"
    for number, (key, value) in enumerate(document.items()):
        yield f"{',' if number else ''}\n  {ENCODE(key)}: "
        yield from _top_level_value(key, value, marked)
    if marked and NON_FINITE not in document:
        yield f",\n  {ENCODE(NON_FINITE)}: "
        yield from _top_level_value(NON_FINITE, marked, [])
    yield "\n}\n"


def _top_level_value(key: str, value: Any, marked: list[str]) -> Iterator[str]:
    if not value or not isinstance(value, (list, dict, Spool)):
        yield finite_json([] if isinstance(value, Spool) else value, (key,), marked)
    elif isinstance(value, dict):
        yield "{"
        yield from (
            f"{',' if i else ''}\n    {ENCODE(k)}: {finite_json(v, (key, k), marked)}"
            for i, (k, v) in enumerate(value.items())
        )
        yield "\n  }"
    else:
        # A spool's entries are JSON already; a task entry lists its own numbers written as strings.
        items = (
            value.lines()
            if isinstance(value, Spool)
            else (
                entry_json(v) if isinstance(v, dict) else finite_json(v, (key, str(i)), marked)
                for i, v in enumerate(value)
            )
        )
        yield "["
        yield from (f"{',' if i else ''}\n    {item}" for i, item in enumerate(items))
        yield "\n  ]"


def entry_json(entry: Mapping[str, Any]) -> str:
    """A task entry as JSON text, its non-finite numbers written as strings and listed in its own `nonFinite`."""
    marked: list[str] = []
    text = finite_json(entry, (), marked)
    if not marked or NON_FINITE in entry:
        return text
    return finite_json({**entry, NON_FINITE: marked}, (), [])


def finite_json(value: Any, path: Sequence[str], marked: list[str]) -> str:
    """The value as strict JSON: NaN and infinities, which JSON has no numbers for (a bare NaN is not JSON to jq or a
    browser), become the strings "NaN", "Infinity" and "-Infinity", their JSON Pointers (RFC 6901) added to marked."""
    try:
        return ENCODE(value)
    except ValueError:
        return ENCODE(_finite(value, list(path), marked))


def _finite(value: Any, path: list[str], marked: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        marked.append("".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path))
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _finite(inner, [*path, str(key)], marked) for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(inner, [*path, str(i)], marked) for i, inner in enumerate(value)]
    return value


def write_atomic(path: str, chunks: Iterable[str]) -> None:
    """Write beside the target, then rename over it: a reader never sees half a file.

    Through a symlink the file it points to is replaced, and the link kept; what is not a regular file (a device, a
    FIFO, a folder) is never replaced.
    """
    stage(path, chunks).commit()


class Staged:
    """A file written in full beside its target, waiting to be renamed over it (commit) or thrown away (discard)."""

    def __init__(self, path: str, target: str, temporary: str) -> None:
        self.path = path  # as given, for messages
        self.target = target
        self.temporary = temporary

    def commit(self) -> None:
        try:
            os.replace(self.temporary, self.target)
        except OSError as exc:
            self.discard()
            raise ConfigError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def discard(self) -> None:
        try:
            os.unlink(self.temporary)
        except FileNotFoundError:
            pass


def stage(path: str, chunks: Iterable[str]) -> Staged:
    """Write the chunks to a temporary file beside path, flushed to disk, with the mode path has (a new file: the mode a
    plain open() gives); ConfigError when that cannot be done."""
    target = os.path.realpath(path)
    try:
        mode: int | None = os.stat(target).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise ConfigError(f"cannot write {path}: not a regular file")
    try:
        fd, temporary = exclusive_file(os.path.dirname(target), ".eval-", ".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    staged = Staged(path, target, temporary)
    try:
        # A lone surrogate from an agent becomes \\udXXX: inside a JSON string, the escape that reads back as it.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            if mode is not None:
                os.chmod(temporary, stat.S_IMODE(mode))  # a results file kept to its owner stays so
            f.writelines(chunks)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        staged.discard()
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        staged.discard()
        raise
    return staged


def commit(staged: Sequence[Staged]) -> None:
    """Rename each staged file over its target; when one cannot be, the rest are thrown away, not left beside theirs."""
    for number, file in enumerate(staged):
        try:
            file.commit()
        except BaseException:
            for rest in staged[number + 1 :]:
                rest.discard()
            raise


def exclusive_file(folder: str, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file of a name no one else has, open to read and write with the mode a plain open() gives, and its path.

    The name holds the process id, so that a later run can tell a file a killed run left from one a run is writing;
    what killed runs left in the folder is removed first.
    """
    _remove_leftovers(folder)
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{os.getpid()}-{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a temporary file in {folder}")


def _remove_leftovers(folder: str) -> None:
    """Remove the temporary files of runs that were killed (kill -9, a power cut) before they could remove them.

    Only where a process id can be asked after without harm (on Windows os.kill ends the process), and only files
    older than this process: a harness in another PID namespace writing to the same folder keeps its files.
    """
    if os.name != "posix":
        return
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = re.fullmatch(LEFTOVER, name) if name.startswith(".eval-") else None
        if match is None or _alive(int(match[1])):
            continue
        path = os.path.join(folder, name)
        try:
            if os.lstat(path).st_mtime < STARTED:
                os.unlink(path)
        except OSError:
            pass  # gone already, or not ours to remove


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


class Spool:
    """The task entries of a run, written to a temporary file as each task completes: memory stays flat however many
    trials there are, and every report reads them back from there, as often as it needs."""

    def __init__(self, results: str) -> None:
        folder = os.path.dirname(os.path.realpath(results))
        try:
            # Nameless from the start where the system can: a Ctrl-C at any instant leaves nothing behind.
            fd, self.path = os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600), ""
        except (AttributeError, OSError):
            fd, self.path = self._named(folder, results)
        # Only written through: lines() reads the descriptor (or the path). A text file open to read too resets its
        # decoder with every write, a Python call for every task.
        self.file = os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace")
        self.count = 0

    @staticmethod
    def _named(folder: str, results: str) -> tuple[int, str]:
        try:
            fd, path = exclusive_file(folder, ".eval-entries-", ".jsonl")
        except OSError as exc:
            raise ConfigError(f"cannot write {results}: {exc.strerror or exc}") from None
        if hasattr(os, "pread"):
            # Nameless from here on: nothing is left behind by a crash, and the folder may go away during the run.
            os.unlink(path)
            path = ""
        return fd, path

    def add(self, entry: Mapping[str, Any]) -> None:
        self.file.write(entry_json(entry) + "\n")
        self.count += 1

    def lines(self) -> Iterator[str]:
        """Each entry as the JSON text it was written as; readers may interleave."""
        self.file.flush()
        if self.path:
            with open(self.path, encoding="utf-8") as f:
                yield from (line.rstrip("\n") for line in f)
            return
        # A line longer than a block is gathered in place: joining it anew with each block took time in its square.
        fd, offset, line = self.file.fileno(), 0, bytearray()
        while block := os.pread(fd, 1 << 16, offset):
            offset += len(block)
            *ends, rest = block.split(b"\n")
            for end in ends:
                line += end
                yield line.decode("utf-8")
                line.clear()
            line += rest

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (json.loads(line) for line in self.lines())

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        """Let the file go: the results file has the entries now."""
        self.file.close()
        if self.path:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


ENCODE = json_encoder(allow_nan=False)  # strict: NaN and the infinities are written as strings (finite_json)
