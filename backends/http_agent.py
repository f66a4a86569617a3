"""The http backend: POST each prompt to the agent's endpoint and parse the reply contract."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from backends.contract import conversation_messages, parse_reply, partial_reply
from backends.options import (
    HEADERS,
    MAX_RESPONSE_BYTES,
    MODEL_PROXY,
    REQUEST_FIELDS,
    RETRIES,
    RETRY_AFTER_SEND,
    SERVING,
    TIMEOUT,
    Serving,
    serving,
)
from harness.endpoints import (
    credential,
    field_secrets,
    header_secrets,
    http_url,
    query_values,
    shown_fields,
    url_secrets,
)
from harness.leaks import NO_SECRETS, Secrets, strings
from harness.records import (
    AgentRequest,
    AgentSurface,
    BackendError,
    ConfigError,
    Reply,
    Tool,
    field,
    record,
    replace,
)
from harness.settings import Setting, Sources

AGENT_URL = Setting(
    var="EVAL_AGENT_URL",
    flag="--agent-url",
    help="the agent's full endpoint, POSTed to as given",
    read=http_url,
    metavar="URL",
)
TOKEN = Setting(
    var="EVAL_AGENT_TOKEN",
    flag=None,
    help="the token, sent in an Authorization: Bearer header",
    read=credential,
    secret=True,
)


@record
class HttpSettings:
    """Where the agent is, how to authenticate, what to add to each request, and how long to wait."""

    url: str = field(repr=False)  # its userinfo and query may be secrets
    token: str | None = field(repr=False)
    headers: Mapping[str, str] = field(repr=False)
    fields: Mapping[str, Any]
    timeout: float
    retries: int
    retry_after_send: bool
    max_response_bytes: int
    serving: Serving | None  # None: the run serves no tools (EVAL_TOOL_SERVER=off)
    model_proxy: str | None = field(default=None, repr=False)  # the upstream the run proxies the agent's model calls to


def request_body(
    request: AgentRequest, run_id: str, fields: Mapping[str, Any], tools: Mapping[str, Tool] | None = None
) -> dict[str, Any]:
    """The JSON the agent receives: EVAL_AGENT_BODY's fields, then the prompt, task id, run id, trial id, trial and
    attempt (1: the transport numbers the retries); for a task with follow-up turns, also the conversation's id, the
    turn, and the messages so far (the newest user message last); for a task that narrows or adds tools, the tools the
    agent has at this turn (tools: the file's, by name); for a trial whose tools the harness serves, where; for a run
    that proxies the agent's model calls, the base URL of the trial's path on the proxy."""
    body = {
        "prompt": request.prompt,
        "taskId": request.task_id,
        "runId": run_id,
        "trialId": request.trial_id,
        "trial": request.trial,
        "attempt": 1,
    }
    if fields:
        body = {**fields, **body}
    if request.conversation_id:
        body.update(conversationId=request.conversation_id, turn=request.turn, messages=conversation_messages(request))
    if request.tools is not None and tools is not None:
        body["tools"] = [tool_entry(tools[name]) for name in request.tools]
    if request.tool_server is not None:
        body["toolServer"] = {"url": request.tool_server[0], "callUrl": request.tool_server[1]}
    if request.model_proxy is not None:
        body["modelProxy"] = {"baseUrl": request.model_proxy}
    return body


def tool_entry(tool: Tool) -> dict[str, Any]:
    """A tool as MCP's tools/list gives it, and as the task file writes it."""
    return {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}


class HttpAgentBackend:
    """A real agent behind POST EVAL_AGENT_URL, which runs its own tools: one request per user turn."""

    NAME = "http"
    PLAYS_TOOLS = False
    SETTINGS = (
        AGENT_URL,
        REQUEST_FIELDS,
        TOKEN,
        HEADERS,
        TIMEOUT,
        RETRIES,
        RETRY_AFTER_SEND,
        MAX_RESPONSE_BYTES,
        *SERVING,
        MODEL_PROXY,
    )

    @classmethod
    def configure(cls, sources: Sources) -> HttpSettings:
        """The agent's URL, its credentials (from one source only) and the request settings."""
        url = sources.require(AGENT_URL, cls.NAME)
        token, headers = sources.get(TOKEN), sources.get(HEADERS)
        if token and ("@" in urlsplit(url).netloc or any(name.lower() == "authorization" for name in headers)):
            where = sources.text(AGENT_URL)[1]
            raise ConfigError(f"{TOKEN.var}: set, and {where} or {HEADERS.var} carries credentials too; give one")
        return HttpSettings(
            url=url,
            token=token,
            headers=headers,
            fields=sources.get(REQUEST_FIELDS),
            timeout=sources.get(TIMEOUT),
            retries=sources.get(RETRIES),
            retry_after_send=sources.get(RETRY_AFTER_SEND),
            max_response_bytes=sources.get(MAX_RESPONSE_BYTES),
            serving=serving(sources),
            model_proxy=sources.get(MODEL_PROXY),
        )

    def __init__(
        self, settings: HttpSettings, surface: AgentSurface, run_id: str, hidden: Secrets = NO_SECRETS
    ) -> None:
        from backends.transport import Transport  # only a run that sends anything pays for sockets

        headers = dict(settings.headers)
        if settings.token:
            headers["Authorization"] = f"Bearer {settings.token}"
        self._secrets = {
            **url_secrets(settings.url, AGENT_URL.var),
            **header_secrets(settings.headers, HEADERS.var),
            **field_secrets(settings.fields, REQUEST_FIELDS.var),
            **({settings.token: TOKEN.var} if settings.token else {}),
        }
        queries = {
            **query_values([settings.url], AGENT_URL.var),
            **query_values(strings(settings.fields), REQUEST_FIELDS.var),
        }
        self.hidden = hidden | Secrets(self._secrets) | Secrets(queries)
        self.transport = Transport(
            settings.url,
            headers=headers,
            timeout=settings.timeout,
            retries=settings.retries,
            max_response_bytes=settings.max_response_bytes,
            hidden=self.hidden,
            retry_after_send=settings.retry_after_send,
            final=lambda body: partial_reply(body) is not None,  # the agent has made its calls: never sent again
        )
        self.run_id = run_id
        self.fields = dict(settings.fields)
        self.tools = {tool.name: tool for tool in surface.tools}

    def secrets(self) -> dict[str, str]:
        """The token, credential-like header and body values, and the URLs' passwords and credential-like query
        values."""
        return self._secrets

    def describe(self) -> dict[str, Any]:
        """Settings fit to print and record: the URL with credentials and query masked, and what of the query keys a
        cassette (a digest of each value that is not a credential's)."""
        transport = self.transport
        return {
            "url": transport.shown_url,
            **({"query": transport.query} if transport.query else {}),
            "timeout": transport.timeout,
            "retries": transport.retries,
            "retryAfterSend": transport.retry_after_send,
            "maxResponseBytes": transport.max_response_bytes,
            **({"body": shown_fields(self.fields)} if self.fields else {}),
        }

    def run(self, request: AgentRequest) -> Reply:
        """One request, retried as the transport sees fit (each attempt numbered), parsed against the contract; an error
        status whose body says what the agent did before it failed is read as that reply, its status said in its
        error."""
        payload = request_body(request, self.run_id, self.fields, self.tools)
        status = None
        try:
            body, attempts = self.transport.post_json(payload, numbered=True, may_retry=_untouched(request))
        except BackendError as err:
            partial = _partial(err)
            if partial is None:
                _unread(err)
                raise
            (body, status), attempts = partial, err.attempts
        try:
            reply = parse_reply(body, attempts, self.hidden)
        except BackendError as err:
            err.attempts = attempts
            raise
        return reply if status is None else replace(reply, error=f"{reply.error} (HTTP {status})")


def _untouched(request: AgentRequest) -> Callable[[], bool] | None:
    """For a request of a trial served its tools: whether the agent has called none of them yet in this turn, and so
    may be asked again without running its tools twice."""
    called = request.tools_called
    return None if called is None else lambda: not called()


def _unread(err: BackendError) -> None:
    """A success's body that is no JSON is still what the agent said: read for leaks (`said`), never written. An error
    status's body is not: it may quote a key to say what failed, as the agent's error message may."""
    from backends.transport import UnreadError  # loaded already: the transport raised the error

    if isinstance(err, UnreadError):
        err.said = err.body.decode("utf-8", "surrogateescape")


def _partial(err: BackendError) -> tuple[dict[str, Any], int] | None:
    """The reply an error status's body holds, when it says what the agent did before it failed, and the status."""
    from backends.transport import StatusError  # loaded already: the transport raised the error

    if not isinstance(err, StatusError) or err.code != "reply:http-status":
        return None
    body = partial_reply(err.body)
    return None if body is None else (body, err.status)
