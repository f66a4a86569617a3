"""A tool environment's worker: imports the user's module, makes the instance, and answers the harness's requests,
one JSON line each, each answer carrying its request's id.

It runs in its own process so that the user's code can hang, exit or crash without taking the harness down; it
imports nothing of the harness. The requests and answers come and go on copies of the pipes it was started with,
which no program the user's code runs inherits: the user's code reads nothing on stdin, and what it prints goes to
stderr, never into the answers. A process the user's code forks never answers: it ends where it would.

A "fork" request makes a copy of the worker as loaded (the module imported, no instance made) that answers the next
requests until "done"; the worker answers the fork again once the copy has ended, with its exit code. The harness
checks many instances of one class this way before a run without importing the module for each (a fresh worker's
start and import is 35 ms and more; a fork, a millisecond), unless the import left a thread running: a fork has none.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from typing import Any, BinaryIO

ORPHAN_CHECK = 0.5  # seconds: how soon a worker whose harness died (even by SIGKILL) ends itself


def main() -> None:
    """Answer requests until the harness closes them."""
    requests, answers = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")  # os.dup's copies are not inherited
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.dup2(2, 1)  # the user's prints go to stderr
    # Each line as it is printed: a print is the best clue to a hang or a crash, and a buffered one dies with it.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the harness's to hear: it ends the worker itself
    threading.Thread(target=_end_when_orphaned, args=(os.getppid(),), daemon=True).start()
    world, worker = World(), os.getpid()
    for line in requests:
        request = json.loads(line)
        if request["op"] == "fork":
            sys.stdout.flush()  # what the user's code printed is printed once, not again by each copy
            child = os.fork()
            if child == 0:  # the copy answers the requests until "done", on a fresh instance of the module as loaded
                worker = os.getpid()
                world.config = request["config"]
                _answer(answers, request["id"], {})
                continue
            _answer(answers, request["id"], {"ended": _ended(child)})
            continue
        if request["op"] == "done":
            os._exit(0)
        try:
            answer = world.handle(request)
        finally:
            if os.getpid() != worker:
                os._exit(0)  # a child the user's code forked came back here: the worker answers, never it
        _answer(answers, request["id"], answer)


def _ended(child: int) -> int:
    """The forked copy's exit code, or minus the signal that ended it, once it has ended."""
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


class World:
    """The user's class and its current instance."""

    def __init__(self) -> None:
        self.cls: Any = None
        self.config: dict[str, Any] = {}
        self.instance: Any = None

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request: load, new, call or state."""
        op = request["op"]
        if op == "load":
            return self.load(request)
        if op == "new":
            return self.new()
        if op == "call":
            return self.call(request["method"], request["args"])
        try:
            return {"state": _state(self.instance)}
        except Exception as exc:
            return {"raised": _error(exc)}

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        """Import the module and find the class; which of the methods asked about it has, and whether a fork of this
        worker is the module as imported: not when the import left a thread running, which no fork has."""
        before = threading.active_count()
        try:
            module = _module(request["module"])
        except BaseException as exc:  # the user's module failing to import is an answer, not the worker's end
            return {"failed": "module", "error": _error(exc)}
        self.cls = getattr(module, request["class"], None)
        if not isinstance(self.cls, type):
            return {"failed": "class", "error": f"{request['module']} has no class {request['class']}"}
        self.config = request["config"]
        has = [
            name for name in request["methods"] if not name.startswith("_") and callable(getattr(self.cls, name, None))
        ]
        return {"methods": has, "forkable": threading.active_count() <= before}

    def new(self) -> dict[str, Any]:
        """A fresh instance, made with the config as keyword arguments."""
        try:
            self.instance = self.cls(**self.config)
        except Exception as exc:
            return {"failed": "config", "error": _error(exc)}
        if not callable(getattr(self.instance, "state", None)) and not hasattr(self.instance, "__dict__"):
            name = self.cls.__name__
            error = (
                f"{name} has no state() method, and its instances (of a class with __slots__) no attributes to take "
                f"the state from: give {name} a state() that returns its state as JSON"
            )
            return {"failed": "class", "error": error}
        return {}

    def call(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """The method's return value, or the exception it raised as the tool's error."""
        try:
            return {"result": getattr(self.instance, method)(**args)}
        except Exception as exc:
            return {"raised": _error(exc)}


def _module(name: str) -> Any:
    """A module from its path (its folder importable, as a test's is) or by its importable name."""
    if not name.endswith(".py"):
        found = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        sys.path[:0] = [os.getcwd(), *(folder for folder in found if folder)]
        return importlib.import_module(name)
    folder, file = os.path.split(name)
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(file[:-3], name)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _state(instance: Any) -> Any:
    """The instance's state(), or its public attributes."""
    state = getattr(instance, "state", None)
    if callable(state):
        return state()
    return {key: value for key, value in vars(instance).items() if not key.startswith("_")}


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _answer(out: BinaryIO, request: int, answer: dict[str, Any]) -> None:
    try:
        line = json.dumps({**answer, "id": request}, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        line = json.dumps({"notJson": _error(exc), "id": request})
    out.write(line.encode("ascii") + b"\n")
    out.flush()


def _end_when_orphaned(parent: int) -> None:
    while True:
        time.sleep(ORPHAN_CHECK)
        if os.getppid() != parent:
            os.killpg(0, signal.SIGKILL)  # itself, and what the user's code started


if __name__ == "__main__":
    main()
