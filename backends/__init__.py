"""Backends turn an AgentRequest into a Reply. BACKENDS maps a name to its class, which declares and reads its settings.

Adding a backend: a module with a class that has a NAME, its SETTINGS (harness.settings.Setting), a `configure(sources)`
class method that reads them into a settings object, a constructor `(settings, surface, run_id, *, hidden)`, and the
`run`, `describe` and `secrets` methods and the `hidden` attribute of harness.records.Backend; then one line in
BACKENDS. Every run knows every backend's settings (its flags, and the variables that are no typo), and imports only
the backend it uses: a backend's SETTINGS live in backends/options.py, and its entry is a Declared (its name, its
settings, where its class is) whose module is imported when more of it is asked for. The stub and the http backend,
the default ones, are imported by every run. A backend that answers inside this process at once (the stub) sets
IN_PROCESS = True, and runs in the run's own thread whatever the concurrency.

Every exchange goes through one seam (harness/exchanges.py), where a run that records or replays installs its cassette
once before the first request: `exchanges.exchange(request, send, hidden)`, where `request` makes what the backend
sends (called only when a cassette is installed) and `send` makes the real exchange and returns what it gave as JSON.
A backend that posts through backends/transport.py's Transport gets it for free; one with wire code of its own
(command, stub) calls it itself, and reads the reply from what it returns, so that a replay parses it again.

A backend whose settings are all another's (openai-responses reads openai's) sets NAMED_ONLY = True: it is used only
when EVAL_BACKEND names it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Protocol

from backends import options
from backends.http_agent import HttpAgentBackend
from backends.stub import StubBackend
from harness.leaks import NO_SECRETS, Secrets
from harness.records import AgentSurface, Backend, ConfigError
from harness.settings import Setting, Sources


class BackendClass(Protocol):
    """What the registry needs of a backend: its name, its settings, how to read them, and how to make one."""

    NAME: str

    @property
    def SETTINGS(self) -> Sequence[Setting]: ...  # a class's tuple, read and never set

    def configure(self, sources: Sources) -> Any: ...

    def __call__(self, settings: Any, surface: AgentSurface, run_id: str, *, hidden: Secrets = ...) -> Backend: ...


class Declared:
    """A backend by its name and settings, its module imported when anything more of it is asked for."""

    def __init__(self, name: str, settings: tuple[Setting, ...], where: str, *, named_only: bool = False) -> None:
        self.NAME, self.SETTINGS, self.NAMED_ONLY = name, settings, named_only
        self.where = where  # `module:Class`

    def loaded(self) -> BackendClass:
        """The backend's class, its module imported now if it is not yet."""
        module, _, name = self.where.partition(":")
        backend: BackendClass = getattr(importlib.import_module(module), name)
        return backend

    def configure(self, sources: Sources) -> Any:
        return self.loaded().configure(sources)

    def __call__(self, settings: Any, surface: AgentSurface, run_id: str, *, hidden: Secrets = NO_SECRETS) -> Backend:
        return self.loaded()(settings, surface, run_id, hidden=hidden)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loaded(), name)

    def __repr__(self) -> str:
        return f"Declared({self.NAME!r}, {self.where})"


BACKENDS: dict[str, BackendClass] = {
    backend.NAME: backend
    for backend in (
        StubBackend,
        HttpAgentBackend,
        Declared("openai", options.OPENAI, "backends.openai_chat:OpenAIChatBackend"),
        Declared(
            "openai-responses",
            options.OPENAI_RESPONSES,
            "backends.openai_responses:OpenAIResponsesBackend",
            named_only=True,
        ),
        Declared("anthropic", options.ANTHROPIC, "backends.anthropic_messages:AnthropicMessagesBackend"),
        Declared("command", options.COMMAND, "backends.command_agent:CommandAgentBackend"),
        Declared("gemini", options.GEMINI, "backends.gemini:GeminiBackend"),
    )
}
BACKEND = Setting(
    var="EVAL_BACKEND",
    flag="--backend",
    help=f"where prompts go: {', '.join(list(BACKENDS)[:-1])} or {list(BACKENDS)[-1]}",
    metavar="NAME",
    shown="the one whose settings are given, else stub",
)


def choose(sources: Sources) -> str:
    """The backend a run uses: the one named, else the one its settings belong to, else the stub.

    A setting given for a backend that is not the one used is an error, so that no setting is silently ignored.
    """
    given = settings_given(sources)
    name, where = sources.text(BACKEND)
    if name is not None:
        if name not in BACKENDS:
            raise ConfigError(f"{where}: unknown backend {name!r} (choose from: {', '.join(BACKENDS)})")
        foreign = [where for where, readers in given.items() if name not in readers]
        if foreign:
            them = "it" if len(foreign) == 1 else "them"
            raise ConfigError(f"{', '.join(foreign)}: set, but the {name} backend does not read {them}")
        return name
    if not given:
        return "stub"
    # A backend that reads only another's settings is never the one they point to.
    candidates = [
        name
        for name, backend in BACKENDS.items()
        if not getattr(backend, "NAMED_ONLY", False) and all(name in readers for readers in given.values())
    ]
    hinted = [name for name in candidates if any(sources.given(s) for s in BACKENDS[name].SETTINGS if s.ambient)]
    if len(candidates) == 1 or len(hinted) == 1:
        return candidates[0] if len(candidates) == 1 else hinted[0]
    choose_one = "choose one with EVAL_BACKEND (or --backend)"
    if not candidates:
        settings = ", ".join(f"{where} ({', '.join(readers)})" for where, readers in given.items())
        raise ConfigError(f"{settings}: no one backend reads all of these; {choose_one}")
    raise ConfigError(f"{', '.join(given)}: read by the {_and(candidates)} backends alike; {choose_one}")


def settings_given(sources: Sources) -> dict[str, list[str]]:
    """Each backend setting given, by where (its flag or its variable), with the names of the backends that read it.

    A provider's own variable (OPENAI_API_KEY...) in the environment may be there for other tools: it is left out.
    """
    given: dict[str, list[str]] = {}
    for name, backend in BACKENDS.items():
        for setting in backend.SETTINGS:
            value, where = sources.text(setting)
            if value is not None and not (setting.ambient and where == setting.var):
                given.setdefault(where, []).append(name)
    return given


def _and(names: Sequence[str]) -> str:
    return f"{', '.join(names[:-1])} and {names[-1]}"
