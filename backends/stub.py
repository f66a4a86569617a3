"""A deterministic agent: canned replies keyed by prompt, for proving the wiring."""

from __future__ import annotations

import json
import os
from typing import Any

from backends.contract import parse_reply
from harness.records import AgentRequest, AgentSurface, BackendError, Reply
from harness.settings import Sources

REPLIES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stub_replies.json")


class StubBackend:
    """Answers each known prompt with its canned reply and records every request it received."""

    NAME = "stub"
    SETTINGS = ()
    CAVEAT = "canned replies: this proves the wiring, not an agent"  # said where the run says what it runs on

    @classmethod
    def configure(cls, sources: Sources) -> None:
        """The stub has no settings."""

    def __init__(
        self,
        settings: None = None,
        surface: AgentSurface | None = None,
        run_id: str = "",
        replies_path: str = REPLIES_PATH,
    ) -> None:
        with open(replies_path, encoding="utf-8") as f:
            self.replies: dict[str, object] = json.load(f)
        self.requests: list[AgentRequest] = []

    def secrets(self) -> dict[str, str]:
        """The stub holds no secret."""
        return {}

    def describe(self) -> dict[str, Any]:
        """The stub has no settings."""
        return {}

    def run(self, request: AgentRequest) -> Reply:
        """Reply as the fixture says; an unknown prompt is an error, so a changed task cannot pass silently."""
        self.requests.append(request)
        if request.prompt not in self.replies:
            raise BackendError("reply:stub-unknown-prompt", "the stub has no canned reply for this prompt")
        return parse_reply(self.replies[request.prompt])
