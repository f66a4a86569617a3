"""Backends turn an AgentRequest into a Reply; BACKENDS maps a name to its factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from records import AgentRequest, Reply, Task


class Backend(Protocol):
    """Sends one request to the agent and returns its parsed reply."""

    def run(self, request: AgentRequest) -> Reply:
        """Raise BackendError when no valid reply can be had."""
        ...


def agent_request(task: Task) -> AgentRequest:
    """What the agent receives for a task: its id and prompt, never its expectation."""
    return AgentRequest(task_id=task.id, prompt=task.prompt)


def _stub() -> Backend:
    from backends.stub import StubBackend

    return StubBackend()


BACKENDS: dict[str, Callable[[], Backend]] = {"stub": _stub}
