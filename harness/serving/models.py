"""The model proxy: an in-app agent's model calls, forwarded to the upstream API (EVAL_MODEL_PROXY) with the agent's own
headers and key, and answered as the upstream answered, a stream passed on chunk by chunk as it comes.

What it forwarded is what the harness saw: every call is recorded on the trial whose path it came to, with its wire
format, model, tokens (from the answer's usage), latency and status. A path is 192 random bits and the only way in; a
path no trial holds is a 404 that sends nothing. The agent's key is forwarded and never written: the values of its key
headers and of a key= query are gathered per trial, for the run to mask. Nothing a client does can hold the run:
bodies are capped, every read and write has a timeout, and close() shuts every connection, the upstream's too.

http.client rather than the backends' Transport: the proxy relays whatever the agent sends, a stream as it comes, with
no retries, pacing or JSON contract of the harness's own, which are what Transport is for (and the engine imports no
backend). The upstream is reached as Transport reaches an agent: straight, or through the environment's proxy.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from http.client import HTTPException
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from harness.records import ModelCall
from harness.serving.listener import CHUNK, Handler, Listener, new_token

if TYPE_CHECKING:
    import http.client

MAX_BODY = 32 * 1024 * 1024  # bytes of one request's body: a model request with images in it is large
MAX_ANSWER = 64 * 1024 * 1024  # bytes of an answer read whole to find its usage; past them, passed on unread
MAX_CONNECTIONS = 256
IDLE = 60.0  # seconds a connection to the agent may wait on one read or one write
UPSTREAM_WAIT = 600.0  # seconds the upstream may take to answer, or between two chunks of a stream: a model thinks
INTERIM = 8  # interim (1xx) answers read past before the final one
KEPT_ALIVE = 32  # connections to the upstream kept open between calls
TAIL = 1024 * 1024  # bytes of an unfinished stream line kept: a longer one is passed on, not read for usage
ANTHROPIC_INPUT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")  # summed: the input
# Headers that change what the model does (a beta feature, the API's version): keyed with the body, never a secret.
ASKING_HEADERS = frozenset({"anthropic-beta", "anthropic-version", "openai-beta"})
KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
# Hop-by-hop headers (RFC 9110 7.6.1) and those the proxy sets itself: never forwarded either way.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",  # asked for as is: the usage is read from the answer, which the agent gets as it came
    }
)
UNREACHABLE = "unreachable"
CLIENT_GONE = "client-gone"
UPSTREAM_GONE = "upstream-gone"
REPLAY_MISS = "replay-miss"


def wire_format(path: str) -> str:
    """The API a call's path speaks: openai-chat, openai-responses, anthropic-messages, gemini, or other."""
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith("/messages"):
        return "anthropic-messages"
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    return "other"


def usage_of(form: str, message: Any, seen: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    """The (input, output) tokens a response or one event of a stream says, over what earlier events said."""
    given, made = seen
    if not isinstance(message, dict):
        return seen
    if form == "gemini":
        metadata = message.get("usageMetadata")
        if isinstance(metadata, dict):
            prompt = _count(metadata.get("promptTokenCount"), None)
            if prompt is not None:  # with what a tool it ran (google_search, code execution) read, billed as input
                given = prompt + (_count(metadata.get("toolUsePromptTokenCount"), None) or 0)
            output = [_count(metadata.get(k), None) for k in ("candidatesTokenCount", "thoughtsTokenCount")]
            if any(value is not None for value in output):
                made = sum(value or 0 for value in output)
        return given, made
    if form == "openai-responses" and isinstance(message.get("response"), dict):
        message = message["response"]  # response.completed's, a stream's last
    if form == "anthropic-messages" and isinstance(message.get("message"), dict):
        message = message["message"]  # message_start's
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return given, made
    if form == "openai-chat":
        return _count(usage.get("prompt_tokens"), given), _count(usage.get("completion_tokens"), made)
    if form == "anthropic-messages":
        parts = [_count(usage.get(k), None) for k in ANTHROPIC_INPUT]
        # a later event's input replaces an earlier one's only when it says every part: the SDK keeps a part unsaid
        if parts[0] is not None and (given is None or None not in parts):
            given = sum(part or 0 for part in parts)
        return given, _count(usage.get("output_tokens"), made)
    return _count(usage.get("input_tokens"), given), _count(usage.get("output_tokens"), made)


def _count(value: Any, otherwise: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else otherwise


def error_body(form: str, message: str) -> bytes:
    """A 502's body in the shape of the API the agent called, so that its SDK says what failed."""
    if form == "anthropic-messages":
        shaped: Any = {"type": "error", "error": {"type": "api_error", "message": message}}
    elif form == "gemini":
        shaped = {"error": {"code": 502, "message": message, "status": "UNAVAILABLE"}}
    else:
        shaped = {"error": {"message": message, "type": "proxy_error", "param": None, "code": "upstream_unreachable"}}
    return json.dumps(shaped).encode()


class ModelTape(Protocol):
    """What the proxy asks of the run's cassette during an exchange (harness/cassette.py's ModelTape)."""

    replaying: bool
    record_missing: bool

    def request(self, method: str, path: str, query: str, body: bytes, asked: Mapping[str, str]) -> dict[str, Any]:
        """A call as the cassette keys it (asked: its headers that say what the model may do)."""
        ...

    def play(self, request: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The recorded answer to a call, or None."""
        ...

    def miss(self, request: Mapping[str, Any]) -> str:
        """Why a call has no recorded answer."""
        ...

    def keep(self, request: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
        """A call sent live, and its answer, for the cassette."""
        ...


class ProxiedTrial:
    """One trial's path on the proxy, for all its turns: the model calls forwarded on it, in order, and the key values
    its agent sent."""

    def __init__(self, base: str) -> None:
        self.token = new_token()
        self.base_url = f"{base}/{self.token}"
        self._keys: set[str] = set()
        self.tape: ModelTape | None = None  # the cassette's, during an exchange of a run that records or replays
        self._misses: list[str] = []  # why the calls a replay's cassette lacked were refused
        self._calls: list[ModelCall] = []
        self._lock = threading.Lock()
        self._on_end: Any = lambda token: None

    def secrets(self) -> tuple[str, ...]:
        """What is never to be written: the path's token, and the keys the agent sent on it so far."""
        with self._lock:
            return (self.token, *self._keys)

    def misses(self) -> tuple[str, ...]:
        """Why the calls a replay's cassette lacked were refused, in order."""
        with self._lock:
            return tuple(self._misses)

    def saw(self, keys: set[str], miss: str | None = None) -> None:
        """Keep the key values the agent sent, and why a call was refused, if it was."""
        with self._lock:
            self._keys |= keys
            if miss is not None:
                self._misses.append(miss)

    def calls(self) -> tuple[ModelCall, ...]:
        """The calls forwarded on this path, in the order they ended."""
        with self._lock:
            return tuple(self._calls)

    def add(self, call: ModelCall) -> None:
        with self._lock:
            self._calls.append(call)

    def end(self) -> None:
        """Forward nothing on this path from now on."""
        self._on_end(self.token)


class ModelProxy:
    """The run's model proxy on 127.0.0.1 (a free port): each trial's calls forwarded upstream at a path of its own."""

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0, offline: bool = False) -> None:
        """offline: a replay's, which answers from the cassette only and sends nothing upstream."""
        target = urlsplit(upstream)
        self.upstream = target
        # as said in a trial's error: without the userinfo, which may be a credential
        self.shown_upstream = target._replace(netloc=target.netloc.rpartition("@")[2]).geturl()
        self._listener = _Listener((host, port), _Handler)
        self._listener.upstream = target
        self._listener.route = _route(target)
        self._listener.offline = offline
        self.base = f"http://{host}:{self._listener.server_address[1]}"
        self._listener.serve_in_thread("model-proxy")

    def trial(self) -> ProxiedTrial:
        """A new path for one trial's model calls."""
        trial = ProxiedTrial(self.base)
        trial._on_end = self._listener.open(trial.token, trial)
        return trial

    def close(self) -> None:
        """Stop: the listener and every connection (the agent's and the upstream's) shut, their threads waited for a
        bounded time."""
        self._listener.close()

    def __enter__(self) -> ModelProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Listener(Listener):
    """The model proxy's HTTP server: its paths are the trials', and each connection's upstream is known to close()
    too, not counted against max_connections."""

    request_queue_size = MAX_CONNECTIONS  # a run's workers all connecting at once wait on no SYN sent again
    max_connections = MAX_CONNECTIONS
    paths: dict[str, ProxiedTrial]
    upstream: Any
    route: _Route
    offline = False

    def __init__(self, address: tuple[str, int], handler: type[Handler]) -> None:
        super().__init__(address, handler)
        self.upstreams: set[socket.socket] = set()  # the upstream's, each in use by one of the agents' connections

    def release(self) -> None:
        self.route.close()

    def sockets(self) -> list[socket.socket]:
        return [*self.connections, *self.upstreams]


class _Handler(Handler):
    """One connection's requests: the path and the body checked, then the call forwarded and its answer passed on."""

    timeout = IDLE
    max_body = MAX_BODY
    server: _Listener

    def _handle(self) -> None:
        path, _, query = self.path.partition("?")
        _, _, rest = path.partition("/")
        token, slash, tail = rest.partition("/")
        trial = self.server.paths.get(token)
        if trial is None:
            self._send(404, close=self._length() != 0)
            return
        body = self._body()
        if body is None:
            return
        keys = {value for key, value in parse_qsl(query) if key.lower() in ("key", "api_key") and value}
        for name in KEY_HEADERS:
            for value in self.headers.get_all(name) or ():
                keys |= {value, value.partition(" ")[2]} - {""}
        trial.saw(keys)
        self._forward(trial, slash + tail, query, body)

    def _forward(self, trial: ProxiedTrial, rest: str, query: str, body: bytes) -> None:
        upstream, route = self.server.upstream, self.server.route
        form = wire_format(rest)
        model = _requested_model(form, rest, body)
        tape = trial.tape
        said = {name.lower(): value for name, value in self.headers.items() if name.lower() in ASKING_HEADERS}
        asked = tape.request(self.command, rest, query, body, said) if tape is not None else None
        if tape is not None and asked is not None and tape.replaying:
            played = tape.play(asked)
            if played is not None:
                self._play(trial, form, model, played)
                return
        if self.server.offline and (tape is None or asked is None or not tape.record_missing):
            # nothing leaves the machine: a call the cassette lacks fails, closed, also one made outside an exchange
            # (after the agent's reply, between its turns), which no entry of the cassette can hold
            outside = f"a model call {self.command} {rest} made outside an exchange with the agent"
            reason = tape.miss(asked) if tape is not None and asked is not None else outside
            trial.add(ModelCall(form, model, 400, None, None, 0.0, REPLAY_MISS))
            trial.saw(set(), reason)
            self._send(400, error_body(form, f"replay:miss: {reason}"), {"Content-Type": "application/json"})
            return
        target = route.prefix + upstream.path.rstrip("/") + rest + (f"?{query}" if query else "")
        headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
        headers.update(route.headers, **{"Accept-Encoding": "identity"})
        started = time.perf_counter()
        connection, reused = route.take()
        response = None
        try:
            while True:
                if not reused:
                    try:
                        connection.connect()
                    except OSError as exc:
                        trial.add(ModelCall(form, model, 502, None, None, _since(started), UNREACHABLE))
                        reason = (
                            f"the model proxy could not reach the upstream API: {exc.strerror or type(exc).__name__}"
                        )
                        self._send(502, error_body(form, reason), {"Content-Type": "application/json"})
                        return
                self._watch(connection.sock)
                try:
                    connection.request(self.command, target, body, headers)
                    response = connection.getresponse()
                    for _ in range(INTERIM):  # interim answers (103 Early Hints), which http.client takes as final
                        if not 100 <= response.status < 200:
                            break
                        response.headers = None  # type: ignore[assignment]  # so begin() reads the next, buffer and all
                        response.begin()
                    break
                except (OSError, HTTPException) as exc:
                    self._unwatch(connection.sock)
                    connection.close()
                    if reused and isinstance(exc, OSError):  # closed while kept alive: once more, on a new connection
                        connection, reused = route.connection(), False
                        continue
                    trial.add(ModelCall(form, model, 502, None, None, _since(started), UPSTREAM_GONE))
                    reason = (
                        "the upstream API closed the connection before it answered"
                        if isinstance(exc, OSError)  # closed or reset, not an answer too odd to read
                        else f"the upstream API's answer could not be read ({type(exc).__name__})"
                    )
                    self._send(502, error_body(form, reason), {"Content-Type": "application/json"})
                    return
            kept, took = self._relay(trial, form, model, response, started, tape is not None)
            if tape is not None and asked is not None and kept is not None:
                content_type = response.getheader("Content-Type", "")
                answer = {"status": response.status, "contentType": content_type, "body": kept}
                tape.keep(asked, {**answer, "latencyMs": took})
        finally:
            self._unwatch(connection.sock)
            if response is not None and response.isclosed() and not response.will_close:
                route.give(connection)  # read to its end: kept alive for the next call
            else:
                connection.close()

    def _relay(
        self,
        trial: ProxiedTrial,
        form: str,
        model: str | None,
        response: http.client.HTTPResponse,
        started: float,
        keep: bool = False,
    ) -> tuple[str | None, float]:
        """Pass the upstream's answer on: read whole when its length is said, else chunk by chunk as it comes. What
        it was, as text, when keep says to keep it for the cassette and it came whole (None otherwise), and the
        milliseconds the call took."""
        passed = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
        length = response.getheader("Content-Length")
        bodiless = response.status in (204, 304) or self.command == "HEAD"  # no body to frame, whatever its headers say
        said = length is not None and length.isascii() and length.isdigit() and len(length) <= 18  # int() reads it
        streamed = not bodiless and (not said or int(length or "0") > MAX_ANSWER)
        # asked for as is, and yet encoded: read (and kept) as decoded, passed on as it came
        coding = (response.getheader("Content-Encoding") or "").strip().lower()
        encoded = coding not in ("", "identity")
        error = None
        usage: tuple[int | None, int | None] = (None, None)
        answered = model
        if not streamed:
            try:
                answer = response.read()
            except (OSError, HTTPException):  # reset, or closed short of its length (IncompleteRead)
                answer, error = b"", UPSTREAM_GONE
            plain = _decoded(answer, coding) if error is None else None
            for message in _whole(plain) if plain is not None else ():
                usage = usage_of(form, message, usage)
                answered = _model_of(message, answered)
            # recorded before it is passed on: the agent's next step, and the trial's end, come after it
            took = _since(started)
            trial.add(ModelCall(form, answered, response.status, usage[0], usage[1], took, error))
            if error is None:
                self._send(response.status, answer, dict(passed), reason=response.reason)
            else:
                self._send(502, error_body(form, "the upstream API closed the connection mid-answer"))
            return (_text(plain) if keep and plain is not None else None), took
        self.send_response_only(response.status, response.reason)
        for key, value in passed:
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = _Events()
        # an answer that is not a stream of events (one JSON of no said length, chunked or closed) is read whole
        sse = "event-stream" in (response.getheader("Content-Type") or "")
        whole = bytearray() if keep or encoded or not sse else None
        try:
            for chunk in _chunks(response):
                if whole is not None:
                    whole += chunk
                    if len(whole) > MAX_ANSWER:
                        whole = None  # too large to keep (the cassette will miss it) or to read
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                except OSError:
                    error = CLIENT_GONE
                    break
                for message in events.read(chunk) if not encoded else ():
                    usage = usage_of(form, message, usage)
                    answered = _model_of(message, answered)
        except (OSError, HTTPException):
            error = UPSTREAM_GONE
        plain = _decoded(bytes(whole), coding) if whole is not None and error is None else None
        if error is None:
            if sse and not encoded:
                last: Iterable[Any] = events.read(b"\n")  # its last line, unended
            elif plain is None:
                last = ()
            else:  # the answer that came whole, or an encoded stream's events, read once it ended
                last = _Events().read(plain + b"\n") if sse else _whole(plain)
            for message in last:
                usage = usage_of(form, message, usage)
                answered = _model_of(message, answered)
        else:
            self.close_connection = True
        took = _since(started)
        # recorded before the answer's end is passed on: the agent's next step, and the trial's end, come after it
        trial.add(ModelCall(form, answered, response.status, usage[0], usage[1], took, error))
        if error is None:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True
        return (_text(plain) if keep and plain is not None else None), took

    def _play(self, trial: ProxiedTrial, form: str, model: str | None, answer: Mapping[str, Any]) -> None:
        """Answer a call as the cassette recorded it: its status, its content type and its body (a stream's events
        whole), its tokens read from it as they were live."""
        body = answer["body"].encode("utf-8")
        usage: tuple[int | None, int | None] = (None, None)
        answered = model
        events = _Events()
        for message in events.read(body + b"\n") if "event-stream" in answer["contentType"] else _whole(body):
            usage = usage_of(form, message, usage)
            answered = _model_of(message, answered)
        took = answer.get("latencyMs")  # as long as it took when recorded, as a replayed exchange lasts
        latency = float(took) if isinstance(took, (int, float)) and not isinstance(took, bool) and took >= 0 else 0.0
        trial.add(ModelCall(form, answered, answer["status"], usage[0], usage[1], latency))
        self._send(answer["status"], body, {"Content-Type": answer["contentType"]})

    def _watch(self, sock: socket.socket | None) -> None:
        if sock is not None:
            with self.server.lock:
                self.server.upstreams.add(sock)

    def _unwatch(self, sock: socket.socket | None) -> None:
        if sock is not None:
            with self.server.lock:
                self.server.upstreams.discard(sock)


class _Route:
    """How the upstream is reached: straight, or through the proxy the environment names (HTTPS_PROXY, HTTP_PROXY,
    NO_PROXY, as urllib reads them), tunnelled for https."""

    def __init__(self, upstream: Any, proxy: Any = None) -> None:
        self.upstream, self.proxy = upstream, proxy
        https = upstream.scheme == "https"
        self.port = upstream.port or (443 if https else 80)
        auth: dict[str, str] = {}
        if proxy is not None and proxy.username is not None:
            import base64
            from urllib.parse import unquote

            pair = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}".encode()
            auth = {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        # Through a plain-HTTP proxy the request line carries the absolute URL, and the proxy's credentials go with each
        # request; through a tunnel (https), the request line carries the path, and the credentials go with CONNECT.
        self.prefix = f"http://{upstream.netloc.rpartition('@')[2]}" if proxy is not None and not https else ""
        self.headers, self.tunnel_headers = ({}, auth) if https else (auth, {})
        self.idle: list[http.client.HTTPConnection] = []
        self.lock = threading.Lock()
        self.closed = False

    def take(self) -> tuple[http.client.HTTPConnection, bool]:
        """A kept-alive connection to the upstream and True, or a new one (not yet connected) and False."""
        with self.lock:
            if self.idle:
                return self.idle.pop(), True
        return self.connection(), False

    def give(self, connection: http.client.HTTPConnection) -> None:
        """Keep a connection whose last answer was read whole, for the next call; closed when the pool is full."""
        with self.lock:
            if not self.closed and len(self.idle) < KEPT_ALIVE:
                self.idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close the kept-alive connections, and every one given back from now on."""
        with self.lock:
            self.closed, idle, self.idle = True, self.idle, []
        for connection in idle:
            connection.close()

    def connection(self) -> http.client.HTTPConnection:
        import http.client

        https = self.upstream.scheme == "https"
        kind = http.client.HTTPSConnection if https else http.client.HTTPConnection
        if self.proxy is None:
            return kind(self.upstream.hostname or "", self.port, timeout=UPSTREAM_WAIT)
        connection = kind(self.proxy.hostname or "", self.proxy.port or 80, timeout=UPSTREAM_WAIT)
        if https:
            connection.set_tunnel(self.upstream.hostname or "", self.port, headers=self.tunnel_headers)
        return connection


def _route(upstream: Any) -> _Route:
    """The route to the upstream, read once for the run."""
    import urllib.request

    proxy = urllib.request.getproxies().get(upstream.scheme)
    if not proxy or urllib.request.proxy_bypass(upstream.hostname or ""):
        return _Route(upstream)
    return _Route(upstream, urlsplit(proxy if "://" in proxy else f"http://{proxy}"))


class _Events:
    """The JSON of a server-sent event stream's data lines (and of a JSON array streamed a line at a time), read as the
    chunks come; a line past TAIL is passed on unread."""

    def __init__(self) -> None:
        self.pending = b""

    def read(self, chunk: bytes) -> Iterator[Any]:
        *lines, last = (self.pending + chunk).split(b"\n")
        self.pending = last if len(last) <= TAIL else b""
        for line in lines:
            line = line.strip()
            if line.startswith(b"data:"):
                line = line[5:].strip()
            if not line or (b"usage" not in line and b"model" not in line):  # most events say neither: not parsed
                continue
            try:
                yield json.loads(line.strip(b",[]") if line[:1] in b"[," else line)
            except (ValueError, RecursionError):
                continue


def _decoded(body: bytes, coding: str) -> bytes | None:
    """An answer's body with its Content-Encoding (gzip or deflate) undone, MAX_ANSWER bytes at most; None when it
    cannot be (br, another coding, or a body that is not what it says)."""
    if coding in ("", "identity") or not body:
        return body
    if coding not in ("gzip", "x-gzip", "deflate"):
        return None
    inflate = zlib.decompressobj(wbits=47)  # a gzip or a zlib header, whichever it has
    try:
        plain = inflate.decompress(body, MAX_ANSWER + 1)
    except zlib.error:
        return None
    return plain if len(plain) <= MAX_ANSWER and inflate.eof else None


def _text(body: bytes) -> str | None:
    """An answer as the cassette keeps it: its text; None for one that is not UTF-8, which no replay could give back."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _whole(body: bytes) -> list[Any]:
    """The JSON of an answer read whole: the items of an array (Gemini's stream without alt=sse), else the one."""
    message = _json(body)
    return message if isinstance(message, list) else [message]


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _chunks(response: http.client.HTTPResponse) -> Iterator[bytes]:
    while True:
        chunk = response.read1(CHUNK)
        if not chunk:
            return
        yield chunk


def _requested_model(form: str, path: str, body: bytes) -> str | None:
    """The model the call asks for: Gemini's is in its path, the others' in the body."""
    if form == "gemini":
        name = path.rpartition("/models/")[2].partition(":")[0]
        return name or None
    if b'"model"' not in body:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    model = message.get("model") if isinstance(message, dict) else None
    return model if isinstance(model, str) else None


def _model_of(message: Any, otherwise: str | None) -> str | None:
    """The model the answer names (the exact version a provider ran), else what the call asked for."""
    if isinstance(message, dict):
        inner = message.get("response") or message.get("message")
        for source in (message, inner if isinstance(inner, dict) else {}):
            model = source.get("model") or source.get("modelVersion")
            if isinstance(model, str):
                return model
    return otherwise


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
