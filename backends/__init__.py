"""Backends turn an AgentRequest into a Reply; BACKENDS maps a name to its factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from harness.records import AgentRequest, AgentSurface, Reply, Task

if TYPE_CHECKING:
    from harness.config import Config


class Backend(Protocol):
    """Sends one request to the agent and returns its parsed reply."""

    def run(self, request: AgentRequest) -> Reply:
        """Raise BackendError when no valid reply can be had."""
        ...

    def describe(self) -> dict[str, Any]:
        """The backend's settings with every secret masked, for the console and the results."""
        ...


def agent_request(task: Task) -> AgentRequest:
    """What the agent receives for a task: its id and prompt, never its expectation."""
    return AgentRequest(task_id=task.id, prompt=task.prompt)


# Each factory imports its module on use, so a stub run never loads http or ssl.
def _stub(config: Config, surface: AgentSurface) -> Backend:
    from backends.stub import StubBackend

    return StubBackend()


def _http(config: Config, surface: AgentSurface) -> Backend:
    from backends.http_agent import HttpAgentBackend

    return HttpAgentBackend(config)


def _openai(config: Config, surface: AgentSurface) -> Backend:
    from backends.openai_chat import OpenAIChatBackend

    return OpenAIChatBackend(config, surface)


def _anthropic(config: Config, surface: AgentSurface) -> Backend:
    from backends.anthropic_messages import AnthropicMessagesBackend

    return AnthropicMessagesBackend(config, surface)


def _command(config: Config, surface: AgentSurface) -> Backend:
    from backends.command_agent import CommandAgentBackend

    return CommandAgentBackend(config)


BACKENDS: dict[str, Callable[[Config, AgentSurface], Backend]] = {
    "stub": _stub,
    "http": _http,
    "openai": _openai,
    "anthropic": _anthropic,
    "command": _command,
}
