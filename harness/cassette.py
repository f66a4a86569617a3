"""Cassettes: every exchange of a run with its agent or provider, recorded to a file and replayed with no network.

A run that records or replays installs its tape at the seam every exchange goes through (harness/exchanges.py); the
tape keys each request, finds its recorded reply at the place the conversation said, records what was sent, and reads
and writes the cassette's file (JSON Lines). Only such a run imports this module.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, get_args

from harness.exchanges import ANY_ANSWER, Place, Shape, held_so_far, placed, proxying, serving
from harness.files import read_input
from harness.leaks import MARKER, NO_SECRETS, Secrets, strings
from harness.proxied import MODEL_PROXY
from harness.records import BackendError, ConfigError, ResultSource, ToolCall, ToolResult
from harness.running import TOOL_SERVER
from harness.text import JSON_DEPTH, call_text, canonical_json, clip, sha256_hex, too_deep

if TYPE_CHECKING:
    from harness.config import Config
    from harness.serving.tools import ServedTurn

FORMAT = "agent-eval-cassette"
VERSION = 1
MAX_BYTES = 1 << 30
# The most milliseconds a cassette's exchanges may add up to: a replayed trial's duration is its exchanges' and what
# the replay took, and a results file holds durations (and their sums) up to 2^53 (about 142,000 years is 2^52).
MAX_LATENCY_MS = 2**52
# What differs on every run of the same request: the run's id, a trial's and a conversation's ids, where its tools are
# served (a path that is a secret, too); and what the place of an exchange says already (the trial), or a retry inside
# it changes (the attempt).
VOLATILE = frozenset({"runId", "trialId", "conversationId", "trial", "attempt", "toolServer", "modelProxy"})
# The id a provider backend gives a call its provider sent without one (backends/provider.py's call_id): numbered in
# the order the run's calls came, which threads and the selection change; a key numbers them anew in each request.
MADE_ID = re.compile(r"(call_h|toolu_h|gemini_h)[0-9]+")
MARKED = re.compile(re.escape(MARKER).replace(re.escape("{}"), "([^\u00bb]*)"))
MISS = "replay:miss"
# A failure with no answer (no connection, no reply in time, the connection dropped, or never sent): an outage, not
# the agent's reply, which --record-missing sends again and a plain replay replays as recorded.
UNANSWERED = frozenset({"reply:connect", "reply:timeout", "reply:reset", "reply:rate-limited"})
BAD_REPLY = "replay:bad-reply"
# What stops a run at once (harness.running's STOPS_THE_RUN): a cassette whose run it stopped says so in its head, with
# the reason, and a replay answers a task that run never sent with that error, not as a miss.
STOPPED = frozenset({"reply:key-rejected"})
# Levels of JSON in a cassette's line: what a run records nests at most JSON_DEPTH levels (the transport's limit on a
# body, the task file's on a result) inside the few of its request, reply and entry; twice that no run writes, and a
# replay walks a line by recursion (restoring, comparing), which a line nested hundreds of levels deep would exhaust.
ENTRY_DEPTH = 2 * JSON_DEPTH
# Where a tool server's path was (a secret, new every run): what a cassette holds in its place.
SERVED_AT = MARKER.format(TOOL_SERVER)
SOURCES: frozenset[str] = frozenset(get_args(ResultSource))
SHOWN = 200  # characters of a served call that a miss quotes
MODEL_KEYS = frozenset({"key", "api_key"})  # query parameters of a model call that carry the agent's key: not keyed


class Tape:
    """A run's cassette: recording to `record`, or replaying `replay` (recording what it misses when record_missing)."""

    def __init__(
        self,
        backend: str,
        task_ids: Sequence[str],
        *,
        record: str | None = None,
        replay: str | None = None,
        record_missing: bool = False,
        restore: Secrets = NO_SECRETS,
    ) -> None:
        """restore: the values a replay puts back where the cassette names them (a task's forbidden text)."""
        self.backend = backend
        self.order = {task_id: index for index, task_id in enumerate(task_ids)}
        self.path = record or replay or ""
        self.replaying = replay is not None
        self.recording = replay is None or record_missing
        self.record_missing = record_missing
        self.sha256 = ""
        self.entries: dict[tuple[str, int, int, int], dict[str, Any]] = {}
        self.stopped_by: dict[str, str] | None = None  # the error (code, reason) that stopped the run recorded, if any
        if replay is not None:
            raw = _read(replay)
            self.sha256 = sha256_hex(raw)
            lines = _entries(replay, raw, backend)
            self.stopped_by = next(lines).get("stoppedBy")
            for entry in lines:
                self.entries[_where(entry)] = entry
        labels = list(restore.named.values())
        self.restore = {MARKER.format(name): value for value, name in restore.named.items() if labels.count(name) == 1}
        self.latency: dict[tuple[str, int], float] = {}
        self.paths: dict[tuple[str, int], set[str]] = {}  # each served trial's tool server paths so far: its secrets
        self.lock = threading.Lock()

    def secrets(self) -> dict[str, str]:
        """Each marker of a secret the replayed replies hold, as that secret: a reply that leaked one still has."""
        found = {
            marker.group(0): marker.group(1)
            for entry in self.entries.values()
            for text in strings([entry["reply"], entry.get("served")])
            for marker in MARKED.finditer(text)
        }
        # A tool server's path said back is no leak, live or replayed: the agent was given it.
        return {marker: name for marker, name in found.items() if marker not in self.restore and marker != SERVED_AT}

    def unserved(self) -> set[str]:
        """The tasks whose recorded exchanges hold no served calls: recorded before a cassette kept them, or of an
        agent not served its tools."""
        return {task for task, *_ in self.entries} - {e["task"] for e in self.entries.values() if "served" in e}

    def manifest(self) -> dict[str, Any]:
        """What the run's manifest says of its cassette."""
        if self.replaying:
            return {"replay": {"cassette": self.path, "sha256": self.sha256, "recordMissing": self.record_missing}}
        return {"record": {"cassette": self.path}}

    def latency_ms(self, task: str, trial: int) -> float:
        """The recorded latency of a trial's replayed exchanges, summed: what a replayed trial's duration adds to the
        time the replay took."""
        with self.lock:
            return self.latency.get((task, trial), 0.0)

    def exchange(
        self,
        request: Mapping[str, Any],
        send: Callable[[], Any],
        hidden: Secrets,
        timed: bool,
        shape: Shape = ANY_ANSWER,
    ) -> Any:
        """The reply to this request: the recorded one when replaying, else sent (and recorded)."""
        place = placed() or Place("", 1, 1, 1)
        proxied = proxying()
        if proxied is not None:  # an agent whose model calls the run proxies: it runs live, its model is recorded
            return self._proxied(place, request, send, hidden, timed, proxied)
        endpoint = serving()
        if endpoint is not None:  # an agent that runs its own tools: its tool server's paths are secrets too
            hidden = hidden | self._served_secrets(place, endpoint)
        shown = hidden.mark_json({part: _steady(value) if part == "body" else value for part, value in request.items()})
        key = sha256_hex(canonical_json({"backend": self.backend, **shown}).encode("utf-8"))
        if self.replaying:
            entry = self._find(key, place)
            if entry is not None and not (self.record_missing and _unanswered(entry["reply"])):
                wrong = _misfit(entry["reply"], shape)
                if wrong is not None:  # edited by hand: the backend would read it wrong
                    where = f"task {place.task}, turn {place.turn}, step {place.step}"
                    raise BackendError(BAD_REPLY, f"the cassette's reply for {where} is not as recorded: {wrong}")
                if ("served" in entry) != (endpoint is not None):  # a task that plays tools now, or no longer
                    said = "with" if endpoint is None else "without"
                    where = f"no recorded reply for task {place.task}, turn {place.turn}, step {place.step}"
                    raise BackendError(MISS, f"{where}: recorded {said} its tools served", attempts=0)
                if endpoint is not None:
                    self._play(entry["served"], endpoint, hidden, place)
                self._spent(place, entry.get("latencyMs", 0.0))
                return self._restored(entry["reply"], endpoint)
            if not self.record_missing:
                if self.stopped_by is not None and not any(task == place.task for task, *_ in self.entries):
                    raise BackendError(self.stopped_by["code"], self.stopped_by["reason"])
                raise BackendError(MISS, self._miss(key, shown, place), attempts=0)
        started, before = time.perf_counter(), held_so_far()
        answered = len(endpoint.calls()) if endpoint is not None else 0
        reply = send()
        entry = {"task": place.task, "trial": place.trial, "turn": place.turn, "step": place.step, "key": key}
        entry.update(request=shown, reply=hidden.mark_json(reply))
        if endpoint is not None:  # the calls the tool server answered during the exchange, in order
            entry["served"] = [_served(served.result, hidden) for served in endpoint.calls()[answered:]]
        if timed:  # a replay sending what its cassette misses measures it as a live run does
            lasted = time.perf_counter() - started - (held_so_far() - before)
            entry["latencyMs"] = round(max(0.0, lasted) * 1000, 3)
        with self.lock:
            self.entries[_where(entry)] = entry
        return reply

    def _proxied(
        self,
        place: Place,
        request: Mapping[str, Any],
        send: Callable[[], Any],
        hidden: Secrets,
        timed: bool,
        proxied: Any,
    ) -> Any:
        """An exchange with an agent whose model calls the run proxies: sent live, replaying or not (its code is what
        a replay runs), its model calls answered from the cassette on a replay and recorded on a recording, in the
        entry of the exchange they were made during. The key the agent sent its model, and its path on the proxy,
        are never written."""
        recorded = self.entries.get((place.task, place.trial, place.turn, place.step)) if self.replaying else None
        models = ModelTape(
            None if not self.replaying else list(recorded.get("models", ())) if recorded else [],
            self.record_missing,
            self._restored,
        )
        proxied.tape = models
        started, before = time.perf_counter(), held_so_far()
        try:
            reply = send()
        finally:
            proxied.tape = None
        if self.replaying and not self.record_missing:  # an agent that no longer asks what it asked has changed too
            for unmade in models.unmade():
                proxied.saw(set(), unmade)
        if not self.recording:
            return reply
        hidden = hidden | Secrets(dict.fromkeys(proxied.secrets(), MODEL_PROXY))
        endpoint = serving()
        if endpoint is not None:  # its tool server's paths are secrets too
            hidden = hidden | self._served_secrets(place, endpoint)
        shown = hidden.mark_json({part: _steady(value) if part == "body" else value for part, value in request.items()})
        key = sha256_hex(canonical_json({"backend": self.backend, **shown}).encode("utf-8"))
        entry = {"task": place.task, "trial": place.trial, "turn": place.turn, "step": place.step, "key": key}
        entry.update(request=shown, reply=hidden.mark_json(reply), models=hidden.mark_json(models.kept))
        if timed:
            entry["latencyMs"] = round(max(0.0, time.perf_counter() - started - (held_so_far() - before)) * 1000, 3)
        with self.lock:
            self.entries[_where(entry)] = entry
        return reply

    def save(self) -> None:
        """Write the cassette: every entry in task-file order, then trial, turn and step; atomically."""
        if not self.recording:
            return
        from harness.results import stage  # the writer of every file a run leaves

        with self.lock:
            entries = sorted(
                self.entries.values(),
                key=lambda entry: (self.order.get(entry["task"], len(self.order)), *_where(entry)),
            )
        head = {"format": FORMAT, "version": VERSION, "backend": self.backend}
        if self.stopped_by is not None:
            head["stoppedBy"] = self.stopped_by
        stage(self.path, (_line(value) for value in (head, *entries))).commit()

    def _served_secrets(self, place: Place, endpoint: ServedTurn) -> Secrets:
        """The tool server's paths of this trial so far, each a secret: a conversation's later requests hold what the
        agent said of an earlier turn's."""
        from harness.observed import secret_paths  # loaded already: the trial is served

        paths = self.paths.setdefault((place.task, place.trial), set())
        paths.update(secret_paths(endpoint))
        return Secrets(dict.fromkeys(paths, TOOL_SERVER))

    def _play(self, recorded: Sequence[Mapping[str, Any]], endpoint: ServedTurn, hidden: Secrets, place: Place) -> None:
        """Play the exchange's recorded calls to the tool server's endpoint, as the agent made them, so that the trial
        is judged on its answers (and its world changed by them) as it was live; a call answered otherwise than
        recorded (the world or a script changed) is a miss, naming it and what differs."""
        for index, made in enumerate(recorded):
            call = ToolCall(
                made["name"],
                self._restored(made["args"], endpoint),
                made.get("argsError"),
                turn=endpoint.turn,
                reported_name=made.get("calledAs"),
            )
            answered = endpoint.answer(call)
            now = None if answered is None else _served(answered.result, hidden)
            changed = _first_difference(now, made) if now is not None else "answer"
            if changed is not None:
                shown = clip(call_text(call.name, made["args"], values=True), SHOWN)
                raise BackendError(
                    MISS,
                    f"the tool server's answers for task {place.task}, turn {place.turn}, step {place.step} differ "
                    f"from the recorded ones: served[{index}], {shown}: its {changed} differs",
                    attempts=0,
                )

    def _spent(self, place: Place, ms: float) -> None:
        with self.lock:
            self.latency[place.task, place.trial] = self.latency.get((place.task, place.trial), 0.0) + ms

    def _find(self, key: str, place: Place) -> dict[str, Any] | None:
        """The entry recorded at this very place (task, trial, turn, step) for this key: a live agent may answer the
        same request in another trial, or in a later turn, otherwise."""
        entry = self.entries.get((place.task, place.trial, place.turn, place.step))
        return entry if entry is not None and entry["key"] == key else None

    def _miss(self, key: str, shown: Mapping[str, Any], place: Place) -> str:
        """Why a request has no recorded reply: where else it was recorded, or what changed against the nearest
        request of its task."""
        where = f"no recorded reply for task {place.task}, turn {place.turn}, step {place.step}"
        ours = [entry for entry in self.entries.values() if entry["task"] == place.task]
        if not ours:
            return f"{where}: no recorded request for this task"
        elsewhere = [entry for entry in ours if entry["key"] == key]
        if elsewhere:
            then = min(elsewhere, key=lambda entry: _distance(entry, place))
            return (
                f"{where}: trial {place.trial}'s request was recorded in trial {then['trial']}, turn {then['turn']}, "
                f"step {then['step']} only"
            )
        nearest = min(ours, key=lambda entry: _distance(entry, place))
        changed = _first_difference(shown, nearest["request"]) or "its key"  # a recorded key its request does not make
        return f"{where}: {changed} differs from the recorded request (turn {nearest['turn']}, step {nearest['step']})"

    def _restored(self, reply: Any, endpoint: ServedTurn | None = None) -> Any:
        """The recorded reply with each value the run knows put back where the cassette names it; a tool server's path
        as the replayed turn's own, masked as the live one was."""
        if endpoint is None:
            return _put_back(reply, self.restore) if self.restore else reply
        from harness.observed import secret_paths  # loaded already: the trial is served

        return _put_back(reply, {**self.restore, SERVED_AT: secret_paths(endpoint)[0]})


def _put_back(value: Any, restore: Mapping[str, str]) -> Any:
    """The value with each marker of the cassette's that restore knows replaced by what it names."""
    if isinstance(value, str):
        return MARKED.sub(lambda found: restore.get(found.group(0), found.group(0)), value)
    if isinstance(value, list):
        return [_put_back(item, restore) for item in value]
    if isinstance(value, dict):
        return {_put_back(key, restore): _put_back(item, restore) for key, item in value.items()}
    return value


class ModelTape:
    """The model calls an agent makes through the run's model proxy during one exchange, as the cassette holds them:
    the recorded ones a replay answers with (each once, the first recorded for the same request first), and the ones
    to keep (those played, and those sent live)."""

    def __init__(
        self, recorded: list[dict[str, Any]] | None, record_missing: bool, restored: Callable[[Any], Any]
    ) -> None:
        self.replaying = recorded is not None
        self.record_missing = record_missing
        self.recorded = recorded or []
        self.used: set[int] = set()
        self.kept: list[dict[str, Any]] = []
        self._restored = restored
        self._lock = threading.Lock()

    @staticmethod
    def request(method: str, path: str, query: str, body: bytes, asked: Mapping[str, str]) -> dict[str, Any]:
        """A model call as a cassette keys it: the method, the path after the trial's (the query without its keys),
        the headers that say what the model may do (a beta, the API's version), when it sent any, and the body (its
        JSON, when it is JSON)."""
        kept = "&".join(part for part in query.split("&") if part and part.split("=")[0].lower() not in MODEL_KEYS)
        try:
            read: Any = _steady(json.loads(body)) if body else ""
        except (ValueError, RecursionError):
            read = body.decode("utf-8", "replace")
        headers = {"headers": dict(sorted(asked.items()))} if asked else {}
        return {"method": method, "path": path + (f"?{kept}" if kept else ""), **headers, "body": read}

    def play(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        """The recorded answer to this call, or None when the exchange recorded none for it."""
        key = sha256_hex(canonical_json(request).encode("utf-8"))
        with self._lock:
            found = next((i for i, made in enumerate(self.recorded) if i not in self.used and made["key"] == key), None)
            if found is None:
                return None
            self.used.add(found)
            self.kept.append(self.recorded[found])
        answer: dict[str, Any] = self._restored(self.recorded[found]["answer"])
        return answer

    def miss(self, request: Mapping[str, Any]) -> str:
        """Why a call has no recorded answer: what differs from the nearest recorded call of the exchange."""
        unused = [made for i, made in enumerate(self.recorded) if i not in self.used]
        if not unused:
            return f"no recorded model call for {request['method']} {request['path']} in this exchange"
        nearest = unused[0]
        changed = _first_difference(request, nearest["request"]) or "its key"
        return f"the model call {request['method']} {request['path']}: {changed} differs from the recorded one"

    def unmade(self) -> list[str]:
        """Why the exchange's recorded calls a replay did not play are misses: each was not made."""
        with self._lock:
            unused = [made["request"] for i, made in enumerate(self.recorded) if i not in self.used]
        return [
            f"the recorded model call {call['method']} {call['path']} was not made in this exchange" for call in unused
        ]

    def keep(self, request: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        """A call sent live, and its answer, for the cassette."""
        key = sha256_hex(canonical_json(request).encode("utf-8"))
        with self._lock:
            self.kept.append({"key": key, "request": dict(request), "answer": dict(answer)})


def _steady(body: Any) -> Any:
    """The body without what differs on every run of the same request: the run's ids left out, the ids the harness
    made for calls numbered in the order they come in it."""
    if isinstance(body, Mapping):
        body = {name: value for name, value in body.items() if name not in VOLATILE}
    made: dict[str, str] = {}

    def renumbered(value: Any) -> Any:
        if isinstance(value, str):
            found = MADE_ID.fullmatch(value)
            return made.setdefault(value, f"{found[1]}{len(made) + 1}") if found else value
        if isinstance(value, list):
            return [renumbered(item) for item in value]
        if isinstance(value, dict):
            return {name: renumbered(item) for name, item in value.items()}
        return value

    return renumbered(body)


def _served(result: ToolResult, hidden: Secrets) -> dict[str, Any]:
    """A call the tool server answered, as a cassette holds it (its secrets marked): the call by its task-file name,
    the name it was called by when that differs, its arguments (why they could not be read, when not), the result and
    where it came from (the case, when one)."""
    call = result.call
    made: dict[str, Any] = {"name": call.name}
    if call.reported_name is not None:
        made["calledAs"] = call.reported_name
    made["args"] = call.args
    if call.args_error is not None:
        made["argsError"] = call.args_error
    made.update(result=result.content, source=result.source)
    if result.case is not None:
        made["case"] = result.case
    marked: dict[str, Any] = hidden.mark_json(made)
    return marked


def _unanswered(reply: Any) -> bool:
    """Whether a recorded reply is a failure with no answer: what a later --record-missing sends again."""
    return isinstance(reply, dict) and reply.get("error") in UNANSWERED


def _misfit(reply: Any, shape: Shape) -> str | None:
    """What a replayed reply lacks of the fields its backend reads, or None."""
    if not isinstance(reply, dict):
        return "reply: expected an object"
    for name, (what, fits) in shape(reply).items():
        if name not in reply:
            return f"reply: no {name}"
        if not fits(reply[name]):
            return f"reply.{name}: expected {what}"
    return None


def _where(entry: Mapping[str, Any]) -> tuple[str, int, int, int]:
    return entry["task"], entry["trial"], entry["turn"], entry["step"]


def _distance(entry: Mapping[str, Any], place: Place) -> tuple[bool, bool, bool, int, int, int]:
    """How far a recorded exchange is from a place in the same task: another turn, step or trial is further."""
    turn, step = entry["turn"] == place.turn, entry["step"] == place.step
    return not (turn and step), entry["trial"] != place.trial, not turn, entry["trial"], entry["turn"], entry["step"]


def _first_difference(now: Any, then: Any, path: str = "") -> str | None:
    """The JSON path of the first field that differs between two JSON values, or None when they are equal."""
    if isinstance(now, dict) and isinstance(then, dict):
        for name in [*now, *(name for name in then if name not in now)]:
            inner = f"{path}.{name}" if path else name
            if name not in now or name not in then:
                return inner
            found = _first_difference(now[name], then[name], inner)
            if found is not None:
                return found
        return None
    if isinstance(now, list) and isinstance(then, list):
        for index in range(max(len(now), len(then))):
            if index >= len(now) or index >= len(then):
                return f"{path}[{index}]"
            found = _first_difference(now[index], then[index], f"{path}[{index}]")
            if found is not None:
                return found
        return None
    same = now == then or (now != now and then != then)  # NaN, as a Python agent may send it, is as recorded
    return None if same and type(now) is type(then) else path or "the request"


def _line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def _read(path: str) -> bytes:
    """The cassette's bytes; ConfigError naming it when it cannot be read or is too large."""
    return read_input(
        path, MAX_BYTES, f"the cassette is over the {MAX_BYTES} bytes it may have", "cannot read the cassette"
    )


# Each entry's fields and what they must be.
ENTRY_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "task": ("a string", lambda value: isinstance(value, str)),
    "trial": ("a whole number from 1", lambda value: type(value) is int and value >= 1),
    "turn": ("a whole number from 1", lambda value: type(value) is int and value >= 1),
    "step": ("a whole number from 1", lambda value: type(value) is int and value >= 1),
    "key": (
        "a SHA-256 in hex",
        lambda value: isinstance(value, str) and re.fullmatch("[0-9a-f]{64}", value) is not None,
    ),
    "request": ("an object", lambda value: isinstance(value, dict)),
    "reply": ("a JSON value", lambda value: True),
}


def _entries(path: str, raw: bytes, backend: str) -> Iterator[dict[str, Any]]:
    """The cassette's head, then its entries, checked; ConfigError naming the file and the line at the first
    problem."""
    lines = raw.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise ConfigError(f"{path}: empty; a cassette starts with a line naming its format and version")
    first: dict[tuple[str, int, int, int], int] = {}  # each place's line
    lasted = 0.0  # every exchange's latency, summed: the replayed trials' durations add it
    for number, line in enumerate(lines, 1):
        try:
            value = json.loads(line.decode("utf-8"), object_pairs_hook=partial(_object, f"{path}: line {number}"))
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: line {number}: not UTF-8 text") from None
        except (ValueError, RecursionError):
            raise ConfigError(
                f"{path}: line {number}: not JSON (a cassette is JSON Lines, one object a line)"
            ) from None
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: line {number}: expected a JSON object")
        if too_deep(line, value, ENTRY_DEPTH):
            raise ConfigError(
                f"{path}: line {number}: JSON nested more than {ENTRY_DEPTH} levels deep: no run records that, "
                "and a replay would walk it by recursion"
            )
        if number == 1:
            _check_head(path, value, backend)
            yield value
            continue
        missing = [name for name in ENTRY_FIELDS if name not in value]
        if missing:
            raise ConfigError(f"{path}: line {number}: an entry without {', '.join(missing)}")
        for name, (what, fits) in ENTRY_FIELDS.items():
            if not fits(value[name]):
                raise ConfigError(f"{path}: line {number}: {name}: expected {what}")
        if "served" in value:
            _check_served(f"{path}: line {number}", value["served"])
        if "models" in value:
            _check_models(f"{path}: line {number}", value["models"])
        latency = value.get("latencyMs", 0)
        if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not 0 <= latency <= MAX_LATENCY_MS:
            raise ConfigError(f"{path}: line {number}: latencyMs: expected a number of milliseconds from 0 to 2^52")
        lasted += latency
        if lasted > MAX_LATENCY_MS:
            raise ConfigError(
                f"{path}: line {number}: latencyMs: the cassette's exchanges add up to more than 2^52 milliseconds, "
                "more than a results file holds"
            )
        place = _where(value)
        if place in first:
            raise ConfigError(
                f"{path}: line {number}: a second entry for task {json.dumps(place[0])}, trial {place[1]}, "
                f"turn {place[2]}, step {place[3]} (line {first[place]} is the first): which one holds is not clear"
            )
        first[place] = number
        yield value


# Each served call's fields (those of SERVED_OPTIONAL only where they say something) and what they must be.
SERVED_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "name": ("a string", lambda value: isinstance(value, str)),
    "args": ("an object", lambda value: isinstance(value, dict)),
    "result": ("a JSON value", lambda value: True),
    "source": (f"one of {', '.join(sorted(SOURCES))}", lambda value: value in SOURCES),
}
SERVED_OPTIONAL: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "calledAs": ("a string", lambda value: isinstance(value, str)),
    "argsError": ("a string", lambda value: isinstance(value, str)),
    "case": ("a whole number from 0", lambda value: type(value) is int and value >= 0),
}


def _check_served(where: str, served: Any) -> None:
    """An entry's served calls as a run records them; ConfigError naming the first field that is not."""
    if not isinstance(served, list):
        raise ConfigError(f"{where}: served: expected an array of the calls the tool server answered")
    for index, made in enumerate(served):
        if not isinstance(made, dict):
            raise ConfigError(f"{where}: served[{index}]: expected an object")
        missing = [name for name in SERVED_FIELDS if name not in made]
        if missing:
            raise ConfigError(f"{where}: served[{index}]: a call without {', '.join(missing)}")
        for name, (what, fits) in {**SERVED_FIELDS, **SERVED_OPTIONAL}.items():
            if name in made and not fits(made[name]):
                raise ConfigError(f"{where}: served[{index}].{name}: expected {what}")


def _check_models(where: str, models: Any) -> None:
    """An entry's model calls as a run records them; ConfigError naming the first field that is not."""
    if not isinstance(models, list):
        raise ConfigError(f"{where}: models: expected an array of the model calls made through the proxy")
    for index, made in enumerate(models):
        answer = made.get("answer") if isinstance(made, dict) else None
        if not (
            isinstance(made, dict)
            and isinstance(made.get("key"), str)
            and isinstance(made.get("request"), dict)
            and isinstance(answer, dict)
            and type(answer.get("status")) is int
            and isinstance(answer.get("contentType"), str)
            and isinstance(answer.get("body"), str)
        ):
            raise ConfigError(
                f"{where}: models[{index}]: expected an object with key, request and answer (status, contentType, body)"
            )


def _object(where: str, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of a cassette's line as a dict; ConfigError naming a key it repeats (where: the file and line)."""
    found = dict(pairs)
    if len(found) < len(pairs):
        repeated = next(key for index, (key, _) in enumerate(pairs) if any(key == other for other, _ in pairs[:index]))
        raise ConfigError(f"{where}: the key {json.dumps(repeated)} twice in one object: which one holds is not clear")
    return found


def _check_head(path: str, head: Mapping[str, Any], backend: str) -> None:
    if head.get("format") != FORMAT:
        raise ConfigError(f'{path}: line 1: not a cassette (expected {{"format": "{FORMAT}", ...}})')
    if head.get("version") != VERSION:
        raise ConfigError(
            f"{path}: line 1: a cassette of version {head.get('version')!r}; this harness reads {VERSION}"
        )
    if head.get("backend") != backend:
        raise ConfigError(f"{path}: recorded on the {head.get('backend')} backend; this run uses the {backend} backend")
    stopped = head.get("stoppedBy", {"code": next(iter(STOPPED)), "reason": ""})
    if not (isinstance(stopped, dict) and stopped.get("code") in STOPPED and isinstance(stopped.get("reason"), str)):
        raise ConfigError(
            f"{path}: line 1: stoppedBy: expected an object with code ({', '.join(sorted(STOPPED))}) and reason"
        )


def open_tape(config: Config, backend: str, task_ids: Sequence[str], restore: Secrets) -> Tape:
    """The run's tape, for a run whose settings ask it to record or replay; the cassette replayed is read and checked
    now."""
    return Tape(
        backend,
        task_ids,
        record=config.record_path,
        replay=config.replay_path,
        record_missing=config.record_missing,
        restore=restore,
    )
