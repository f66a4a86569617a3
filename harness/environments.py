"""A trial's world: a tool environment's worker process (harness/envworker.py), the calls it answers, its state.

The user's code runs in the worker, never in the harness: one that hangs past its timeout, exits, crashes, answers
what is not JSON, answers out of turn (what is not the answer to the request) or prints more than MAX_OUTPUT makes its
trial an error (tool:environment, with the last lines it wrote on stderr), and the run goes on. A worker lives for
one trial and is killed at its end, or at the harness's. Before a run, check_environments checks every environment
and reference in forks of a few workers that imported the class, killed when it returns.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import IO, Any

from harness.leaks import NO_SECRETS, Secrets
from harness.records import ConfigError, EndState, Environment, Task, ToolCall, ToolResult, WorldError
from harness.scoring import state_problem
from harness.text import JSON_DEPTH, call_text, canonical_json, clip, nested_deeper, sha256_hex

MAX_OUTPUT = 1024 * 1024  # bytes the user's code may print over a trial
MAX_ANSWER = 16 * 1024 * 1024  # bytes of one answer: a result or a state
STDERR_TAIL = 2000  # characters of the worker's last output a reason quotes
STDERR_LINES = 5
# The worker is the harness's own module, found where the harness is (a folder or the .pyz), run by its path on
# sys.path so that no PYTHONPATH or folder of the user's can put another harness in its place.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOT = f"import sys; sys.path.insert(0, {ROOT!r}); from harness.envworker import main; del sys.path[0]; main()"
OUTPUT_READ = 2.0  # seconds to wait for the last of a dead worker's output (a child of its may hold the pipe)
_LIVE: set[subprocess.Popen[bytes]] = set()  # every worker not yet ended, killed when the harness exits
_LIVE_LOCK = threading.Lock()
IDLE_WORKERS = 16  # loaded workers kept for the next check of their class, of any class: each holds 3 pipes
# The keys of each request's answers besides its id: what it was asked for, or why it could not give it.
ANSWERS = {
    "load": ({"methods", "forkable"}, {"failed", "error"}),
    "new": (set(), {"failed", "error"}),
    "call": ({"result"}, {"raised"}),
    "state": ({"state"}, {"raised"}),
    "fork": (set(),),
}


class World:
    """One trial's environment: its worker, started at the first request, and the instance made from the config."""

    def __init__(self, spec: Environment, hidden: Secrets = NO_SECRETS) -> None:
        self.spec = spec
        self.hidden = hidden
        self.process: subprocess.Popen[bytes] | None = None
        self.unread = bytearray()  # what the worker wrote on its answers' pipe past the last answer taken
        self.answered_all = False  # the worker closed its answers' pipe
        self.stderr: list[bytes] = []
        self.printed = 0
        self.asked = 0  # the id of the last request sent, which its answer carries
        self.has: frozenset[str] = frozenset()
        self.forkable = False  # whether a fork of the loaded worker is the module as imported (no thread it started)
        self.output: threading.Thread | None = None  # reads what the worker prints, for the reason it failed

    def implements(self, tool: str) -> bool:
        """Whether a call of the tool runs a method of the environment's."""
        return self.spec.methods.get(tool) in self._started().has

    def call(self, call: ToolCall) -> ToolResult:
        """The method's return value as the call's result; an exception it raised as `{"error": "Type: message"}`."""
        answer = self._ask({"op": "call", "method": self.spec.methods[call.name], "args": dict(call.args)})
        if "raised" in answer:
            return ToolResult(call, {"error": answer["raised"]}, source="environment")
        return ToolResult(call, answer["result"], source="environment")

    def state(self) -> Any:
        """The instance's state() as JSON, or its public attributes."""
        answer = self._ask({"op": "state"})
        if "raised" in answer:
            raise self._failed(f"{self.spec.class_name}.state raised {answer['raised']}")
        return answer["state"]

    def end(self, task: Task) -> tuple[EndState, str | None]:
        """The final state, and why it is not what the task expects (None when it is, or nothing is expected)."""
        state = self.state()
        expected = task.state
        if expected is None:
            return EndState(state), None
        if expected.reference is None:
            return EndState(state), state_problem(expected.match, state)
        reference = reference_state(self.spec, task, self.hidden)
        digest = sha256_hex(canonical_json(reference).encode("utf-8"))
        return EndState(state, digest), state_problem(reference, state, reference=True)

    def close(self) -> None:
        """Kill the worker, if it started."""
        if self.process is not None:
            _kill(self.process)

    def _started(self) -> World:
        if self.process is None:
            self._loaded()._made(self._ask({"op": "new"}))
        return self

    def _loaded(self) -> World:
        """The worker started, the module imported and the class found; no instance made."""
        if self.process is None:
            self._spawned()
        spec = self.spec
        load = {"module": spec.module, "class": spec.class_name, "config": spec.config}
        answer = self._ask({"op": "load", **load, "methods": sorted(set(spec.methods.values()))})
        if "failed" in answer:
            raise WorldError(answer["error"], answer["failed"])
        self.has = frozenset(answer["methods"])
        self.forkable = answer["forkable"] is True
        return self

    def _spawned(self) -> None:
        self.process = _spawn(self.hidden)
        self.output = threading.Thread(target=self._read_output, args=(self.process.stderr,), daemon=True)
        self.output.start()

    def _forked(self, spec: Environment) -> int:
        """A copy of the loaded worker, with an instance made from the spec's config, answers until _unforked."""
        self.printed = 0  # each copy may print as much as a worker
        self._ask({"op": "fork", "config": spec.config})
        fork = self.asked
        self._made(self._ask({"op": "new"}))
        return fork

    def _unforked(self, fork: int) -> None:
        """The copy ended: a WorldError unless it ended as asked."""
        process = self._started().process
        assert process is not None and process.stdin is not None
        try:
            process.stdin.write(b'{"op": "done"}\n')
            process.stdin.flush()
        except OSError:
            pass
        line = self._answer()
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):
            answer = None
        if answer != {"ended": 0, "id": fork}:
            raise self._failed(f"its copy ended otherwise: {_said(line)}")

    def _made(self, answer: Mapping[str, Any]) -> None:
        if answer.get("failed") == "config":
            raise WorldError(f"{self.spec.class_name}(**config) raised {answer['error']}", "config")
        if "failed" in answer:
            raise WorldError(answer["error"], answer["failed"])

    def _ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
        process = self._started().process
        assert process is not None and process.stdin is not None
        self.asked += 1
        try:
            process.stdin.write(json.dumps({**request, "id": self.asked}).encode("utf-8") + b"\n")
            process.stdin.flush()
        except OSError:
            pass  # it ended: said below, with what it wrote
        line = self._answer()
        if not line.endswith(b"\n"):
            if len(line) >= MAX_ANSWER:
                raise self._failed(f"an answer over {MAX_ANSWER} bytes")
            raise self._failed(self._how_it_ended())
        try:
            answer = json.loads(line)
        except (ValueError, RecursionError):
            answer = None
        if not isinstance(answer, dict):  # the user's code wrote to the answers' pipe
            raise self._failed(f"it answered what is not JSON: {_said(line)}")
        if answer.pop("id", None) != self.asked or not _shaped(request["op"], answer):  # or a process it forked
            raise self._failed(f"it answered out of turn: {_said(line)}")
        what = f"{self.spec.class_name}.{request['method'] if request['op'] == 'call' else request['op']}"
        if "notJson" in answer:
            raise self._failed(f"{what} returned what is not JSON ({answer['notJson']})")
        if nested_deeper(answer, JSON_DEPTH + 1):  # +1: the answer's own object
            raise self._failed(f"{what} returned JSON nested more than {JSON_DEPTH} levels")
        return answer

    def _failed(self, what: str) -> WorldError:
        if self.process is not None:
            _kill(self.process)
        if self.output is not None:
            self.output.join(timeout=OUTPUT_READ)  # what it printed before it ended is the reason's best part
        tail = b"".join(self.stderr).decode("utf-8", "replace").strip().splitlines()[-STDERR_LINES:]
        said = self.hidden.mask("\n".join(tail))[-STDERR_TAIL:]
        return WorldError(f"the environment failed: {what}" + (f"; its last output:\n{said}" if said else ""))

    def _how_it_ended(self) -> str:
        assert self.process is not None
        if self.printed > MAX_OUTPUT:
            return f"it printed more than {MAX_OUTPUT} bytes"
        try:
            code = self.process.wait(timeout=self.spec.timeout)
        except subprocess.TimeoutExpired:
            return "it closed its answers"
        return f"it exited with code {code}" if code >= 0 else f"it was ended by signal {-code}"

    def _answer(self) -> bytes:
        """The worker's next line (at most MAX_ANSWER bytes), or what it wrote before it closed its answers; a
        WorldError past the timeout. Read in the asking thread: a reader thread of its own made each call two handoffs
        of the interpreter lock longer."""
        assert self.process is not None and self.process.stdout is not None
        stream = self.process.stdout
        deadline = time.monotonic() + self.spec.timeout
        while True:
            end = self.unread.find(b"\n", 0, MAX_ANSWER)
            if end >= 0 or len(self.unread) >= MAX_ANSWER or self.answered_all:
                taken = end + 1 if end >= 0 else min(len(self.unread), MAX_ANSWER)
                line = bytes(self.unread[:taken])
                del self.unread[:taken]
                return line
            wait = deadline - time.monotonic()
            try:
                if wait <= 0 or not select.select([stream], [], [], wait)[0]:
                    raise self._failed(f"no answer within {self.spec.timeout:g} s")
                chunk = os.read(stream.fileno(), 1 << 16)
            except (OSError, ValueError):  # closed as the harness ends (every worker killed): no more answers
                chunk = b""
            self.answered_all = not chunk
            self.unread += chunk

    def _read_output(self, stream: IO[bytes]) -> None:
        with stream:
            while True:
                chunk = stream.read1(65536)  # type: ignore[attr-defined]
                if not chunk:
                    return
                self.printed += len(chunk)
                self.stderr = [*self.stderr[-8:], chunk]  # enough for the last lines, never all of it
                if self.printed > MAX_OUTPUT and self.process is not None:
                    self.process.kill()
                    return


def _said(line: bytes) -> str:
    return clip(line.decode("utf-8", "replace").strip(), 200)


def _shaped(op: str, answer: Mapping[str, Any]) -> bool:
    """Whether the answer is one the worker gives to a request of that op."""
    if set(answer) == {"notJson"}:
        return isinstance(answer["notJson"], str)
    if set(answer) not in ANSWERS[op]:
        return False
    methods = answer.get("methods", [])
    texts = [answer[key] for key in ("failed", "error", "raised") if key in answer]
    return isinstance(methods, list) and all(isinstance(text, str) for text in [*methods, *texts])


@contextmanager
def world_of(spec: Environment, hidden: Secrets = NO_SECRETS) -> Iterator[World]:
    """The environment's world for one trial, its worker killed when the trial ends."""
    world = World(spec, hidden)
    try:
        yield world
    finally:
        world.close()


def reference_state(spec: Environment, task: Task, hidden: Secrets = NO_SECRETS) -> Any:
    """The state the task's expected calls make on a fresh instance; a call of them that raises is a WorldError.

    In a worker of its own: what the agent's calls left in the class or the module must not be the reference's start.
    """
    assert task.state is not None and task.state.reference is not None
    made = World(spec, hidden)
    try:
        for call in task.state.reference:
            if call.name not in task.tool_results and made.implements(call.name):
                answer = made._ask({"op": "call", "method": spec.methods[call.name], "args": dict(call.args)})
                if "raised" in answer:  # the reference would be a state the expected calls do not make
                    made_call = call_text(call.name, call.args, values=True)
                    raise WorldError(f"the reference call {made_call} raised {answer['raised']}")
        return made.state()
    finally:
        made.close()


def check_environments(path: str, tasks: Sequence[Task], hidden: Secrets = NO_SECRETS) -> dict[str, frozenset[str]]:
    """Start each environment the tasks use once, before anything is sent: a module, class, method or config that is
    not there is a ConfigError at its JSON path (importing the user's code happens in a worker, never here), as is a
    reference call that raises.

    Each distinct environment is checked once and each reference played once, several at a time, in copies of a
    worker that loaded the class (a fork each, as fresh as a new worker's instance); a task found wrong is checked
    again as a trial starts its world, in workers of its own, for the same error whatever the order the checks ended
    in: the first in task order. Returns the tools each environment answers, by where it is set (its JSON path).
    """
    jobs: list[tuple[Task, bool]] = []  # each task to check, and whether its environment is checked with it
    seen: set[str] = set()
    for task in tasks:
        spec = task.environment
        if spec is None:
            continue
        same = _environment_key(spec)
        if same not in seen or (task.state and task.state.reference):
            jobs.append((task, same not in seen))
            seen.add(same)
    checks = _Checks(hidden)
    pool = ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1)))
    try:
        found = [pool.submit(checks.clean, task, first) for task, first in jobs]
        for (task, first), clean in zip(jobs, found, strict=True):
            if not clean.result():
                checks.has[_loader_key(task.environment)] = _check_task(path, task, first, hidden)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        checks.close()
    answered: dict[str, frozenset[str]] = {}
    for spec in {task.environment.where: task.environment for task in tasks if task.environment}.values():
        has = checks.has[_loader_key(spec)]
        answered[spec.where] = frozenset(tool for tool, method in spec.methods.items() if method in has)
    for task in tasks:  # a tool whose script is only its failures needs the environment to answer after them
        spec = task.environment
        if spec is None:
            continue
        for name, script in task.tool_results.items():
            if script.fail_first and not (script.results or script.cases) and name not in answered[spec.where]:
                raise ConfigError(
                    f"{path}: task {task.id}: toolResults.{name}.failFirst: {name} has nothing to answer after its "
                    f"failures: {spec.class_name} has no method {spec.methods[name]}, and no sequence, cases or "
                    "default is given"
                )
    return answered


def _environment_key(spec: Environment) -> str:
    """What an environment's check depends on, the same for two environments set alike in two places."""
    methods = sorted(spec.methods.items())
    return canonical_json([spec.module, spec.class_name, spec.config, methods, spec.named, spec.timeout])


def _loader_key(spec: Environment | None) -> str:
    """What a loaded worker depends on: every instance of the class is made by a fork of one."""
    assert spec is not None
    return canonical_json([spec.module, spec.class_name, sorted(set(spec.methods.values())), spec.timeout])


class _Checks:
    """Workers that loaded a class, each forked for the instances checked: as many of each class as check at once,
    and at most IDLE_WORKERS of them, of any class, kept between checks."""

    def __init__(self, hidden: Secrets) -> None:
        self.hidden = hidden
        self.lock = threading.Lock()
        self.idle: list[tuple[str, World]] = []  # by loader key, the least recently used first
        self.started: list[World] = []
        self.has: dict[str, frozenset[str]] = {}  # the methods the class has, by loader key
        self.ended = False

    def clean(self, task: Task, first: bool) -> bool:
        """Whether the task's environment (when first) and its reference are found right; False also when not sure."""
        spec = task.environment
        assert spec is not None
        key = _loader_key(spec)
        reference = task.state.reference if task.state else None
        try:
            world = self._take(key, spec)
        except WorldError:
            return False

        def implements(tool: str) -> bool:  # by this task's map: the worker's is the first task's of its class
            return spec.methods.get(tool) in world.has

        try:
            # A module that started a thread at import is checked in workers of its own, as a trial starts them.
            if (
                not world.forkable
                or (first and not all(map(implements, spec.named)))
                or any(call.name not in task.tool_results and not implements(call.name) for call in reference or ())
            ):
                self._give_back(key, world)
                return False
            fork = world._forked(spec)
            clean = True
            for call in reference or ():
                if clean and call.name not in task.tool_results and implements(call.name):
                    answer = world._ask({"op": "call", "method": spec.methods[call.name], "args": dict(call.args)})
                    clean = "raised" not in answer
            if clean and reference:
                world.state()
            world._unforked(fork)
        except (WorldError, OSError, ValueError):  # ValueError: its pipe closed as the preflight ends
            world.close()
            return False
        self._give_back(key, world)
        return clean

    def close(self) -> None:
        """Kill every worker started, and start no more."""
        with self.lock:
            self.ended = True
            started = list(self.started)
        for world in started:
            world.close()

    def _take(self, key: str, spec: Environment) -> World:
        with self.lock:
            if self.ended:
                raise WorldError("the preflight ended")
            for at in range(len(self.idle) - 1, -1, -1):
                if self.idle[at][0] == key:
                    return self.idle.pop(at)[1]
            world = World(spec, self.hidden)
            world._spawned()  # now: a worker started after close() would outlive it
            self.started.append(world)
        world._loaded()
        with self.lock:
            self.has[key] = world.has
        return world

    def _give_back(self, key: str, world: World) -> None:
        with self.lock:
            if self.ended:
                pass
            elif len(self.idle) < IDLE_WORKERS:
                self.idle.append((key, world))
                return
            else:  # a worker for each class, methods and timeout set would hold its pipes until the checks end
                self.idle.append((key, world))
                world = self.idle.pop(0)[1]
                self.started.remove(world)
        world.close()


def _check_task(path: str, task: Task, first: bool, hidden: Secrets) -> frozenset[str]:
    """The task's environment and reference checked in fresh workers, as a trial starts them: the ConfigError of the
    first thing wrong, else the methods the class has."""
    spec = task.environment
    assert spec is not None
    world = World(spec, hidden)
    try:
        world._started()
    except WorldError as err:
        raise ConfigError(f"{path}: {spec.where}{'.' + err.key if err.key else ''}: {err}") from None
    finally:
        world.close()
    for tool in spec.named if first else ():
        if not world.implements(tool):
            method = spec.methods[tool]
            raise ConfigError(f"{path}: {spec.where}.methods.{tool}: {spec.class_name} has no method {method}")
    reference = task.state.reference if task.state else None
    for call in reference or ():
        if call.name not in task.tool_results and not world.implements(call.name):
            where = task.state.where if task.state else ""
            raise ConfigError(
                f"{path}: {where}: the reference calls {call.name}, which neither {spec.class_name} nor the "
                "task's toolResults answer"
            )
    if reference and task.state:
        try:
            reference_state(spec, task, hidden)
        except WorldError as err:
            raise ConfigError(f"{path}: {task.state.where}: {err}") from None
    return world.has


def _spawn(hidden: Secrets) -> subprocess.Popen[bytes]:
    # The harness's secrets stay out of the worker's environment; the rest is the user's code's to read.
    environ = {name: value for name, value in os.environ.items() if hidden.find(value) is None}
    process = subprocess.Popen(
        # -I: no user site and no PYTHON* variables read at start, a third of a start's 35 ms (the worker puts the
        # working folder and PYTHONPATH back on sys.path for a module named by its name, as a test would find it).
        [sys.executable, "-I", "-c", BOOT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
        start_new_session=True,  # a group of its own: the processes the user's code starts are ended with it
    )
    with _LIVE_LOCK:
        _LIVE.add(process)
    return process


def _kill(process: subprocess.Popen[bytes]) -> None:
    with _LIVE_LOCK:
        if process not in _LIVE:  # ended already: its process id, waited for, may be another's by now
            return
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the worker, and what the user's code started that is still there
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for pipe in (process.stdin, process.stdout):  # its stderr is closed by the thread reading it, at its end
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass
    with _LIVE_LOCK:
        _LIVE.discard(process)


@atexit.register
def _kill_all() -> None:
    """No worker outlives the harness, whatever cut the run short."""
    for process in list(_LIVE):
        _kill(process)
