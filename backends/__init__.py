"""Backends turn an AgentRequest into a Reply. BACKENDS maps a name to its class, which declares and reads its settings.

Adding a backend: a module with a class that has a NAME, its SETTINGS (harness.settings.Setting), a `configure(sources)`
class method that reads them into a settings object, a constructor `(settings, surface, run_id)`, and the `run` and
`describe` methods of harness.records.Backend; then one line in BACKENDS. Keep the module's imports light: every run
imports every backend to know its flags, and only the one chosen sends anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from backends.anthropic_messages import AnthropicMessagesBackend
from backends.command_agent import CommandAgentBackend
from backends.http_agent import AGENT_URL, HttpAgentBackend
from backends.openai_chat import OpenAIChatBackend
from backends.stub import StubBackend
from harness.records import AgentSurface, Backend, ConfigError
from harness.settings import Setting, Sources


class BackendClass(Protocol):
    """What the registry needs of a backend: its name, its settings, how to read them, and how to make one."""

    NAME: str
    SETTINGS: Sequence[Setting]

    def configure(self, sources: Sources) -> Any: ...

    def __call__(self, settings: Any, surface: AgentSurface, run_id: str) -> Backend: ...


BACKENDS: dict[str, BackendClass] = {
    backend.NAME: backend
    for backend in (StubBackend, HttpAgentBackend, OpenAIChatBackend, AnthropicMessagesBackend, CommandAgentBackend)
}
BACKEND = Setting(
    "EVAL_BACKEND",
    "--backend",
    f"where prompts go: {', '.join(list(BACKENDS)[:-1])} or {list(BACKENDS)[-1]}",
    metavar="NAME",
    shown="http when an agent URL is set, else stub",
)


def choose(sources: Sources) -> str:
    """The backend's name: as given, else http when an agent URL is given, else stub."""
    name, where = sources.text(BACKEND)
    name = name or ("http" if sources.given(AGENT_URL) else "stub")
    if name not in BACKENDS:
        raise ConfigError(f"{where}: unknown backend {name!r} (choose from: {', '.join(BACKENDS)})")
    return name
