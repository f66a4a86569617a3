"""The tool server: each trial's tools, answered by its ToolPlayer, served at a path of its own over MCP (the
streamable HTTP transport, JSON responses) and over a plain JSON endpoint for agents without an MCP client.

What the server answered is what the harness saw: every call is recorded, in order, with its result. A path is 192
random bits and the only key to a trial's tools; a path no trial holds, or one whose turn ended, is a 404 that calls
nothing. Nothing a client does can hold the run: bodies are capped, every read and write on a connection has a
timeout, the connections are capped, and close() shuts every one of them.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from harness.records import Tool, ToolCall, ToolResult, WorldError, record
from harness.serving.listener import Handler, Listener, new_token
from harness.text import JSON_DEPTH, nested_deeper

# The revisions of MCP whose initialize handshake this server speaks, newest first: a client asking for another is
# answered with the newest, as the lifecycle says.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ASSUMED_VERSION = "2025-03-26"  # a request without MCP-Protocol-Version, as the transport says
BATCHED = "2025-03-26"  # the one revision whose servers take JSON-RPC batches
SERVER_INFO = {"name": "eval-agent-tools", "version": "1"}
MAX_BODY = 1024 * 1024  # bytes of one request's body
MAX_CALLS = 10_000  # calls a trial's paths answer; past them, an error that calls nothing and is not recorded
MAX_SESSIONS = 64  # MCP sessions a path holds at once
MAX_CONNECTIONS = 256  # open at once; past them, a new connection is closed at once
IDLE = 30.0  # seconds a connection may wait on one read or one write (a keep-alive client waits on its model)
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
TOOL_SERVER_FAILED = "the tool server failed"
ENVIRONMENT_FAILED = "the tool environment failed"

ENDED = b""  # what a batch's message answers when its turn ended while the batch was answered

# JSON-RPC's error codes
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603


@record
class ServedCall:
    """A call the server answered: the call (by its task-file name) and its result, the turn, and whether it was an
    error (isError: true over MCP, {"error": ...} on the plain endpoint)."""

    result: ToolResult
    turn: int
    is_error: bool


def failed(content: Any) -> bool:
    """Whether a result is a failure: an object whose "error" is a text (a scripted error, an environment's
    exception)."""
    return isinstance(content, dict) and isinstance(content.get("error"), str)


class _Trial:
    """What a trial's turns share: one call answered at a time, the count of them, and how the answering failed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.failure: WorldError | None = None
        self.bug: Exception | None = None


class ServedTurn:
    """One trial's tools at one turn, at a path of its own: the calls answered there, in order."""

    def __init__(
        self,
        trial: _Trial,
        base: str,
        tools: Sequence[Tool],
        answer: Callable[[ToolCall], ToolResult],
        turn: int,
        names: Mapping[str, str] | None,
    ) -> None:
        self.token = new_token()
        self.url = f"{base}/{self.token}/mcp"
        self.call_url = f"{base}/{self.token}/call"
        self.refused = 0  # calls past MAX_CALLS, answered with an error and not recorded
        served_as = {task_name: offered for offered, task_name in (names or {}).items()}
        # Offered by the names' keys, and answered by the task file's names too (a request's tools say them): the
        # loader lets no tool's safe name be another's task-file name.
        self.offered = {name: tool.name for tool in tools for name in (served_as.get(tool.name, tool.name), tool.name)}
        self.listing = json.dumps(
            {
                "tools": [
                    {
                        "name": served_as.get(tool.name, tool.name),
                        "description": tool.description,
                        # MCP requires the object type the task file lets go unsaid; a client refuses the listing
                        "inputSchema": {"type": "object", **tool.input_schema},
                    }
                    for tool in tools
                ]
            },
            default=_plain,
        )
        self.turn = turn
        self.sessions: dict[str, str] = {}  # session id -> the protocol version it negotiated
        self.ended = False
        self._answer = answer
        self._calls: list[ServedCall] = []
        self._trial = trial
        self._lock = trial.lock  # one call at a time: a trial's world and scripts answer in order
        self._on_end: Callable[[str], object] = lambda token: None
        self._sessions_lock = threading.Lock()

    @property
    def failure(self) -> WorldError | None:
        """The trial's environment itself failed (answer() raised it, at this turn or before): the trial is an
        error, and no call of the trial is answered by it again."""
        return self._trial.failure

    @property
    def bug(self) -> Exception | None:
        """answer() raised what is not a WorldError, at this turn or before: a bug of the harness's, to raise."""
        return self._trial.bug

    def calls(self) -> tuple[ServedCall, ...]:
        """The calls answered at this path, in the order answered."""
        return tuple(self._calls)

    def end(self) -> None:
        """Serve nothing at this path from now on; a call being answered is waited for."""
        self._on_end(self.token)
        with self._lock:
            self.ended = True

    def open_session(self, asked: Any) -> tuple[str, str]:
        """A new MCP session's id, and the protocol version it speaks: the one asked for when this server speaks it,
        else its newest."""
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        session = secrets.token_urlsafe(24)
        with self._sessions_lock:
            if len(self.sessions) >= MAX_SESSIONS:
                del self.sessions[next(iter(self.sessions))]  # the oldest: a client that starts over leaves its last
            self.sessions[session] = version
        return session, version

    def end_session(self, session: str) -> bool:
        """End an MCP session; whether there was one by that id."""
        with self._sessions_lock:
            return self.sessions.pop(session, None) is not None

    def call(self, name: str, arguments: Any) -> ServedCall | None:
        """Answer one call of a tool by its offered name, recorded; None when the turn has ended (nothing called)."""
        task_name = self.offered.get(name)
        return self.answer(_call(name if task_name is None else task_name, name, arguments, self.turn))

    def answer(self, call: ToolCall) -> ServedCall | None:
        """Answer a call as read (by its task-file name, the name it was called by kept when it differs; a replay
        plays its recorded calls so), recorded; None when the turn has ended (nothing called)."""
        task_name = self.offered.get(call.reported_name or call.name)
        with self._lock:
            if self.ended:
                return None
            if self._trial.calls >= MAX_CALLS:
                self.refused += 1
                refused = ToolResult(call, {"error": f"more than {MAX_CALLS} calls in this trial"}, "unscripted")
                return ServedCall(refused, self.turn, True)
            self._trial.calls += 1
            if task_name != call.name:
                result = ToolResult(call, {"error": f"no tool named {call.name} is offered"}, "unscripted")
            elif call.args_error is not None:
                result = ToolResult(call, {"error": call.args_error}, "unscripted")
            elif self._trial.failure is not None:
                result = ToolResult(call, {"error": ENVIRONMENT_FAILED}, "environment")
            elif self._trial.bug is not None:
                result = ToolResult(call, {"error": TOOL_SERVER_FAILED}, "unscripted")
            else:
                result = self._answered(call)
            served = ServedCall(result, self.turn, failed(result.content))
            self._calls.append(served)
            return served

    def _answered(self, call: ToolCall) -> ToolResult:
        try:
            return self._answer(call)
        except WorldError as err:
            self._trial.failure = err  # what the environment said stays the harness's: it may quote the user's code
            return ToolResult(call, {"error": ENVIRONMENT_FAILED}, "environment")
        except Exception as err:
            self._trial.bug = err
            return ToolResult(call, {"error": TOOL_SERVER_FAILED}, "unscripted")


def _call(name: str, offered: str, arguments: Any, turn: int) -> ToolCall:
    """The call as the harness judges it: by the task-file name, the offered name kept when it differs."""
    reported = offered if offered != name else None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCall(name, {}, "arguments are not a JSON object", turn=turn, reported_name=reported)
    if nested_deeper(arguments, JSON_DEPTH):  # the harness masks, judges and writes them by recursion
        return ToolCall(
            name, {}, f"arguments nested more than {JSON_DEPTH} levels deep", turn=turn, reported_name=reported
        )
    return ToolCall(name, arguments, turn=turn, reported_name=reported)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


class ToolServer:
    """One server for the run, on its own threads: a path per trial's turn, shut down with the run."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, advertised: str | None = None) -> None:
        self._listener = _Listener((host, port), _Handler)
        self.port: int = self._listener.server_address[1]
        shown = f"[{host}]" if self._listener.address_family == socket.AF_INET6 else host
        self.base = (advertised or f"http://{shown}:{self.port}").rstrip("/")
        own = urlsplit(self.base)
        self._listener.prefix = own.path  # what a proxy in front may leave on the path: /tools of https://…/tools
        self._listener.origins = {f"http://{name}:{self.port}" for name in LOOPBACK} | {
            f"{own.scheme}://{own.netloc}".lower()
        }
        self._trials: weakref.WeakKeyDictionary[Any, _Trial] = weakref.WeakKeyDictionary()
        self._trials_lock = threading.Lock()
        self._listener.serve_in_thread("tool-server")

    def serve(
        self,
        tools: Sequence[Tool],
        answer: Callable[[ToolCall], ToolResult],
        turn: int,
        names: Mapping[str, str] | None = None,
    ) -> ServedTurn:
        """A new path serving these tools (offered by the names' keys where names map them), answered one call at a
        time by answer. The turns served the same answer (a trial's ToolPlayer's) are a trial's: one of its calls is
        answered at a time, MAX_CALLS in all."""
        owner = getattr(answer, "__self__", answer)  # a trial's ToolPlayer, whose answer each of its turns is given
        with self._trials_lock:
            trial = self._trials.get(owner)
            if trial is None:
                trial = self._trials[owner] = _Trial()
        served = ServedTurn(trial, self.base, tools, answer, turn, names)
        served._on_end = self._listener.open(served.token, served)
        return served

    def close(self) -> None:
        """Stop serving: the listener and every connection shut, their threads waited for a bounded time."""
        self._listener.close()

    def __enter__(self) -> ToolServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Listener(Listener):
    """The tool server's HTTP server: its paths are the trials' turns."""

    max_connections = MAX_CONNECTIONS
    paths: dict[str, ServedTurn]

    def __init__(self, address: tuple[str, int], handler: type[Handler]) -> None:
        super().__init__(address, handler)
        self.origins: set[str] = set()
        self.prefix = ""


class _Handler(Handler):
    """One connection's requests: the path, the Origin and the body checked, then MCP or the plain endpoint."""

    timeout = IDLE
    max_body = MAX_BODY
    server: _Listener

    def _handle(self) -> None:
        body = self._body()
        if body is None:
            return
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower().rstrip("/") not in self.server.origins:
            self._send(403)  # a web page of another site, perhaps by DNS rebinding: MCP's transport says refuse
            return
        path = self.path.partition("?")[0]
        if self.server.prefix and path.startswith(self.server.prefix + "/"):
            path = path[len(self.server.prefix) :]
        _, _, rest = path.partition("/")
        token, _, endpoint = rest.partition("/")
        turn = self.server.paths.get(token) if endpoint in ("mcp", "call") else None
        if turn is None:
            self._send(404)
            return
        if endpoint == "call":
            self._plain(turn, body)
        else:
            self._mcp(turn, body)

    def _plain(self, turn: ServedTurn, body: bytes) -> None:
        if self.command != "POST":
            self._send(405, headers={"Allow": "POST"})
            return
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            message = None
        name = message.get("name") if isinstance(message, dict) else None
        if not isinstance(name, str):
            self._json(400, {"error": 'expected a JSON object {"name": ..., "arguments": {...}}'})
            return
        served = turn.call(name, message.get("arguments"))
        if served is None:
            self._send(404)
            return
        content = served.result.content
        self._json(200, content if served.is_error else {"result": content})

    def _mcp(self, turn: ServedTurn, body: bytes) -> None:
        if self.command == "DELETE":
            self._end_session(turn)
            return
        if self.command != "POST":
            self._send(405, headers={"Allow": "POST, DELETE"})  # no stream of the server's own messages: it has none
            return
        version = self.headers.get("MCP-Protocol-Version")
        if version is not None and version not in PROTOCOL_VERSIONS:
            shown = version[:40]
            error = _error(None, INVALID_REQUEST, f"Unsupported protocol version: {shown}", PROTOCOL_VERSIONS)
            self._json(400, error)
            return
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            self._json(400, _error(None, PARSE_ERROR, "Parse error"))
            return
        if isinstance(message, list):
            self._batch(turn, message, version)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._json(400, _error(None, INVALID_REQUEST, "Invalid Request"))
            return
        method = message.get("method")
        ident = message.get("id")
        is_request = "id" in message
        if method is None and is_request and ("result" in message or "error" in message):
            self._send(202)  # a response: the server asks nothing, so there is nothing to match it with
            return
        if not isinstance(method, str) or (
            is_request and (isinstance(ident, bool) or not isinstance(ident, (str, int)))
        ):
            self._json(400, _error(None, INVALID_REQUEST, "Invalid Request"))
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            if not is_request:
                self._json(400, _error(None, INVALID_REQUEST, "Invalid Request: initialize is a request"))
                return
            self._initialize(turn, ident, params)
            return
        session = self.headers.get("Mcp-Session-Id")
        if session is None:
            self._json(400, _error(ident, INVALID_REQUEST, "Bad Request: no Mcp-Session-Id"))
            return
        if session not in turn.sessions:
            self._send(404)  # ended, or never issued: the client starts a new session
            return
        if not is_request:
            self._send(202)
            return
        answer = self._response(turn, method, ident, params)
        if answer is None:
            self._send(404)
        else:
            self._answer(answer)

    def _batch(self, turn: ServedTurn, messages: list[Any], version: str | None) -> None:
        """A JSON-RPC batch, which the 2025-03-26 revision has servers take (later ones removed them): each message
        answered as it would be alone, in one array; 202 when it holds no request."""
        session = self.headers.get("Mcp-Session-Id")
        if session is None:
            self._json(400, _error(None, INVALID_REQUEST, "Bad Request: no Mcp-Session-Id"))
            return
        negotiated = turn.sessions.get(session)
        if negotiated is None:
            self._send(404)
            return
        if (version or negotiated) != BATCHED or not messages:
            self._json(400, _error(None, INVALID_REQUEST, f"Invalid Request: no batches after {BATCHED}"))
            return
        answers = []
        for message in messages:
            answer = self._batched(turn, message)
            if answer == ENDED:
                self._send(404)
                return
            if answer is not None:
                answers.append(answer)
        if answers:
            self._answer(b"[" + b", ".join(answers) + b"]")
        else:
            self._send(202)

    def _batched(self, turn: ServedTurn, message: Any) -> bytes | None:
        """One message of a batch: its answer; None for a notification or a response; ENDED when the turn has."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _dumped(_error(None, INVALID_REQUEST, "Invalid Request"))
        method, ident, is_request = message.get("method"), message.get("id"), "id" in message
        if method is None and is_request and ("result" in message or "error" in message):
            return None
        if not isinstance(method, str) or (
            is_request and (isinstance(ident, bool) or not isinstance(ident, (str, int)))
        ):
            return _dumped(_error(None, INVALID_REQUEST, "Invalid Request"))
        if not is_request:
            return None
        if method == "initialize":
            return _dumped(_error(ident, INVALID_REQUEST, "Invalid Request: initialize is not part of a batch"))
        params = message.get("params")
        return self._response(turn, method, ident, params if isinstance(params, dict) else {}) or ENDED

    def _response(self, turn: ServedTurn, method: str, ident: Any, params: Mapping[str, Any]) -> bytes | None:
        """The answer to a request of an open session; None when the turn has ended."""
        if method == "ping":
            return _dumped(_result(ident, {}))
        if method == "tools/list":
            return f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "result": {turn.listing}}}'.encode()
        if method == "tools/call":
            return self._tools_call(turn, ident, params)
        return _dumped(_error(ident, METHOD_NOT_FOUND, f"Method not found: {method[:100]}"))

    def _initialize(self, turn: ServedTurn, ident: Any, params: Mapping[str, Any]) -> None:
        session, version = turn.open_session(params.get("protocolVersion"))
        result: dict[str, Any] = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO}
        self._answer(_result(ident, result), {"Mcp-Session-Id": session})

    def _tools_call(self, turn: ServedTurn, ident: Any, params: Mapping[str, Any]) -> bytes | None:
        """The answer to a tools/call, the call answered and recorded; None when the turn has ended."""
        name = params.get("name")
        if not isinstance(name, str):
            return _dumped(_error(ident, INVALID_PARAMS, "Invalid params: tools/call needs a tool's name"))
        served = turn.call(name, params.get("arguments"))
        if served is None:
            return None
        content = served.result.content
        if name not in turn.offered:  # as the spec says: an unknown tool is the protocol's error, not the tool's
            return _dumped(_error(ident, INVALID_PARAMS, f"Unknown tool: {name[:100]}"))
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=_plain)
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": served.is_error}
        if isinstance(content, dict):
            result["structuredContent"] = content
        return _dumped(_result(ident, result))

    def _end_session(self, turn: ServedTurn) -> None:
        session = self.headers.get("Mcp-Session-Id")
        if session is None:
            self._send(400)
        elif not turn.end_session(session):
            self._send(404)
        else:
            self._send(200)

    def _answer(self, message: Mapping[str, Any] | bytes, headers: Mapping[str, str] | None = None) -> None:
        """A JSON-RPC answer: as JSON, or as one server-sent event when the client accepts only a stream."""
        body = message if isinstance(message, bytes) else _dumped(message)
        accept = self.headers.get("Accept", "")
        if "text/event-stream" in accept and "application/json" not in accept and "*/*" not in accept:
            stream = b"event: message\ndata: " + body + b"\n\n"
            self._send(200, stream, {**(headers or {}), "Content-Type": "text/event-stream"})
        else:
            self._send(200, body, {**(headers or {}), "Content-Type": "application/json"})

    def _json(self, status: int, message: Any) -> None:
        self._send(status, _dumped(message), {"Content-Type": "application/json"})


def _result(ident: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _error(ident: Any, code: int, message: str, supported: Sequence[str] = ()) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if supported:
        error["data"] = {"supported": list(supported)}
    return {"jsonrpc": "2.0", "id": ident, "error": error}


def _dumped(message: Any) -> bytes:
    # ASCII, escapes and all: a lone surrogate an agent sent (a JavaScript agent's cut emoji) has no UTF-8.
    return json.dumps(message, default=_plain).encode("ascii")
