"""The http backend: POST each prompt to the agent's endpoint and parse the reply contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backends.contract import parse_reply
from backends.transport import Transport
from harness.config import Config
from harness.records import AgentRequest, BackendError, Reply


def request_body(request: AgentRequest, run_id: str, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON the agent receives: EVAL_AGENT_BODY's fields, then the prompt, task id and run id."""
    return {**extra, "prompt": request.prompt, "taskId": request.task_id, "runId": run_id}


class HttpAgentBackend:
    """A real agent behind POST EVAL_AGENT_URL."""

    def __init__(self, config: Config) -> None:
        assert config.agent_url is not None
        headers = dict(config.agent_headers)
        if config.agent_token:
            headers["Authorization"] = f"Bearer {config.agent_token}"
        self.transport = Transport(
            config.agent_url,
            headers=headers,
            timeout=config.timeout,
            retries=config.retries,
            max_response_bytes=config.max_response_bytes,
        )
        self.run_id = config.run_id
        self.extra = dict(config.agent_body)

    def describe(self) -> dict[str, Any]:
        """Settings fit to print and record: the URL with credentials and query masked."""
        transport = self.transport
        return {
            "url": transport.shown_url,
            "timeout": transport.timeout,
            "retries": transport.retries,
            "maxResponseBytes": transport.max_response_bytes,
        }

    def run(self, request: AgentRequest) -> Reply:
        """One request, retried as the transport sees fit, parsed against the contract."""
        body, attempts = self.transport.post_json(request_body(request, self.run_id, self.extra))
        try:
            return parse_reply(body, attempts)
        except BackendError as err:
            err.attempts = attempts
            raise
