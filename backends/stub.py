"""A deterministic agent: canned replies keyed by prompt, for proving the wiring."""

from __future__ import annotations

import json
import os
from typing import Any

from backends.contract import parse_reply
from backends.http_agent import request_body
from harness import exchanges
from harness.leaks import NO_SECRETS, Secrets
from harness.records import AgentRequest, AgentSurface, BackendError, Reply
from harness.settings import Sources

REPLIES_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stub_replies.json")
RECORDED = exchanges.answer_or_failure({"reply": ("a JSON value", lambda value: True)})  # as _canned gives it


class StubBackend:
    """Answers each known user message with its canned reply, or its canned replies step by step; records requests.

    It plays a model: in a conversation task the harness plays its tool results back to it and asks again.
    """

    NAME = "stub"
    SETTINGS = ()
    PLAYS_TOOLS = True
    CAVEAT = "canned replies: this proves the wiring, not an agent"  # said where the run says what it runs on
    IN_PROCESS = True  # answers at once, in the run's own thread: no worker threads

    @classmethod
    def configure(cls, sources: Sources) -> None:
        """The stub has no settings."""

    def __init__(
        self,
        settings: None = None,
        surface: AgentSurface | None = None,
        run_id: str = "",
        replies_path: str = REPLIES_PATH,
        hidden: Secrets = NO_SECRETS,
    ) -> None:
        # Read through this module's loader: from a folder, or from inside the single-file build (a zip).
        self.replies: dict[str, Any] = json.loads(__loader__.get_data(replies_path))  # type: ignore[name-defined]
        self.requests: list[AgentRequest] = []
        self.hidden = hidden
        self.run_id = run_id
        self.tools = {tool.name: tool for tool in surface.tools} if surface else None

    def secrets(self) -> dict[str, str]:
        """The stub holds no secret."""
        return {}

    def describe(self) -> dict[str, Any]:
        """The stub has no settings."""
        return {}

    def run(self, request: AgentRequest) -> Reply:
        """Reply as the fixture says, keyed by the newest user message: a reply, or a list of them, one per step.

        An unknown message is an error, so a changed task cannot pass silently; so is a step past the list's end.
        """
        self.requests.append(request)
        # Recorded and replayed as the body an http agent would be sent, and the canned reply as the agent's.
        outcome = exchanges.exchange(
            lambda: {"body": request_body(request, self.run_id, {}, self.tools)},
            lambda: self._canned(request),
            self.hidden,
            timed=False,
            shape=RECORDED,
        )
        if "error" in outcome:
            raise BackendError(outcome["error"], outcome["reason"])
        return parse_reply(outcome["reply"], hidden=self.hidden)

    def _canned(self, request: AgentRequest) -> dict[str, Any]:
        """The canned reply for the request's step, or why there is none."""
        if request.prompt not in self.replies:
            return {"error": "reply:stub-unknown-prompt", "reason": "the stub has no canned reply for this prompt"}
        canned = self.replies[request.prompt]
        steps = canned if isinstance(canned, list) else [canned]
        if len(request.steps) >= len(steps):
            reason = f"the stub has no canned reply for step {len(request.steps) + 1}"
            return {"error": "reply:stub-unknown-prompt", "reason": reason}
        return {"reply": steps[len(request.steps)]}
