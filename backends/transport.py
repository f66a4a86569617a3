"""POST JSON over HTTP(S): keep-alive per thread, a deadline per request, retries, a size cap."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from backends.http_wire import Connection, PeerClosed, ProtocolError, Response, TooLarge, TunnelRefused
from backends.pacing import RATE_LIMIT_WAIT, Pacer, told_wait
from harness import __version__, exchanges
from harness.endpoints import basic_credentials, keyed_query, redact_url
from harness.leaks import NO_SECRETS, Secrets
from harness.records import BackendError, ConfigError
from harness.text import JSON_DEPTH, json_bytes, too_deep

RETRY_STATUSES = frozenset({429, 502, 503, 504})
AUTH_STATUSES = frozenset({401, 403})
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
SNIPPET_CHARS = 200
KEPT_HEADERS = ("content-type", "retry-after")  # of a response, in a cassette: what the harness reads of them
# Of a request's headers, what never goes into a cassette's key: the harness's version, the size, the credentials.
UNKEYED_HEADERS = frozenset({"host", "user-agent", "content-length", "authorization", "proxy-authorization"})
# What a replayed outcome must hold, as _sent records it.
ATTEMPTS = ("a whole number from 1", lambda value: type(value) is int and value >= 1)
# A failure may have taken none: a request the rate limits would hold past their bound ends unsent (reply:rate-limited).
FAILED: exchanges.Fields = {
    **exchanges.FAILURE,
    "attempts": ("a whole number from 0", lambda value: type(value) is int and value >= 0),
}
RESPONDED: exchanges.Fields = {
    "status": ("an HTTP status", lambda value: type(value) is int and 100 <= value <= 599),
    "headers": (
        "an object of strings",
        lambda value: isinstance(value, dict) and all(isinstance(item, str) for item in value.values()),
    ),
    "attempts": ATTEMPTS,
}


class RetryableError(BackendError):
    """A failure worth another attempt: a connection error, a timeout, 429 or a 50x; started: whether the agent may
    have begun work on the request (it was sent, and no answer says it was turned away)."""

    def __init__(self, code: str, reason: str, retry_after: float | None = None, *, started: bool = True) -> None:
        super().__init__(code, reason)
        self.retry_after = retry_after
        self.started = started


class StatusError(BackendError):
    """A response whose status is no success, with its status and body for a backend that reads more of it."""

    def __init__(self, code: str, reason: str, attempts: int, status: int, body: bytes) -> None:
        super().__init__(code, reason, attempts)
        self.status = status
        self.body = body


class UnreadError(BackendError):
    """A success whose body is no JSON to read, with that body: an agent's says what it says all the same."""

    def __init__(self, code: str, reason: str, body: bytes) -> None:
        super().__init__(code, reason)
        self.body = body


class Transport:
    """Sends JSON bodies to one URL and returns decoded JSON replies, or raises BackendError."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        timeout: float,
        retries: int,
        max_response_bytes: int,
        retry_statuses: frozenset[int] = RETRY_STATUSES,
        error_text: Callable[[bytes, Secrets], str] | None = None,
        hidden: Secrets = NO_SECRETS,
        usage: Callable[[Any], tuple[int, int] | None] | None = None,
        retry_after_send: bool = True,
        final: Callable[[bytes], bool] | None = None,
    ) -> None:
        """hidden: every value never to be written, masked in what an error quotes of a reply before it is clipped;
        usage: the (input, output) tokens a success's decoded body says it cost, for the pacer's estimates;
        retry_after_send: whether to retry a request the other end may have started on (a timeout, a reset, a 502,
        504 or 503 without Retry-After), not only one it turned away or never got;
        final: whether an error status's body ends the request, never retried (an agent's reply of what it did)."""
        parts = urlsplit(url)
        self.shown_url = redact_url(url)
        self.timeout = timeout
        self.retries = retries
        self.max_response_bytes = max_response_bytes
        self.retry_statuses = retry_statuses
        self.error_text = error_text or snippet
        self.hidden = hidden
        self.usage = usage
        self.retry_after_send = retry_after_send
        self.final = final
        self.pacer = Pacer()  # shared by every thread's requests: the endpoint's rate limits are the run's
        tls = parts.scheme == "https"
        host = parts.hostname or ""
        port = parts.port or (443 if tls else 80)
        authority = f"[{host}]" if ":" in host else host
        authority += "" if port == (443 if tls else 80) else f":{port}"
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

        fields = {
            "Host": authority,
            "User-Agent": f"agent-eval-harness/{__version__}",
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        if parts.username is not None:
            fields["Authorization"] = basic_credentials(parts.username, parts.password)
        proxy, proxy_fields = _proxy_for(parts.scheme, host)
        if proxy and not tls:
            fields.update(proxy_fields)
            # Through a plain-HTTP proxy the request line carries the absolute URL.
            path = f"http://{authority}{path}"
        overridden = {name.lower() for name in headers}
        fields = {name: value for name, value in fields.items() if name.lower() not in overridden}
        fields.update(headers)
        head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in fields.items())
        self._head = (head + "Content-Length: ").encode("latin-1")
        # What identifies a request in a cassette, besides its body: not the scheme, host or port, nor a credential in
        # the query.
        self.query = keyed_query(url)
        self.wire_path = parts.path or "/"
        self.wire_headers = {
            name: value
            for name, value in fields.items()
            if name.lower() not in UNKEYED_HEADERS and not hidden.find(value)
        }
        self._wire = {
            "path": self.wire_path,
            **({"query": self.query} if self.query else {}),
            "headers": self.wire_headers,
        }

        tunnel = None
        if proxy and tls:
            lines = [
                f"CONNECT {authority} HTTP/1.1",
                f"Host: {authority}",
                *(f"{k}: {v}" for k, v in proxy_fields.items()),
            ]
            tunnel = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._connection_args: dict[str, Any] = {
            "address": proxy or (host, port),
            "tls": _tls_context() if tls else None,
            "server_hostname": host,
            "tunnel": tunnel,
        }
        self._local = threading.local()

    def post_json(
        self, payload: Mapping[str, Any], numbered: bool = False, may_retry: Callable[[], bool] | None = None
    ) -> tuple[Any, int]:
        """The decoded JSON reply and the number of attempts it took; through the run's cassette, when it has one.
        numbered: the payload's "attempt" says which attempt each one is; may_retry: whether a failed attempt may
        still be retried (not once the agent has changed a served world)."""
        body = json_bytes(payload)  # what the agent said goes back to it as it said it, in UTF-8
        request = self._request(body)
        place = exchanges.placed()
        task = place.task if place else None
        cost = self.pacer.estimate(task, len(body))
        renumbered = payload if numbered else None
        if exchanges.installed() is None:  # a run's every request: with no cassette, no closure is made for one
            return self._outcome(self._sent(request, cost, task, len(body), renumbered, may_retry))
        return self._outcome(
            exchanges.exchange(
                lambda: {**self._wire, "body": payload},
                lambda: self._sent(request, cost, task, len(body), renumbered, may_retry),
                self.hidden,
                shape=_recorded,
            )
        )

    def _request(self, body: bytes) -> bytes:
        return self._head + str(len(body)).encode() + b"\r\n\r\n" + body

    def _sent(
        self,
        request: bytes,
        cost: tuple[int, int],
        task: str | None,
        size: int,
        renumbered: Mapping[str, Any] | None = None,
        may_retry: Callable[[], bool] | None = None,
    ) -> dict[str, Any]:
        """The final outcome of the request, paced and retried as need be, as JSON: the last response, or the error that
        ended the attempts without one. A 429 that said how long to wait spends no retry; the waits are bounded. A
        request the other end may have started on is retried only when retry_after_send; renumbered: the payload whose
        "attempt" each attempt's request says, when the body says which."""
        pacer = self.pacer
        deadline = time.monotonic() + RATE_LIMIT_WAIT
        attempt = spent = 0
        while True:
            attempt += 1
            if renumbered is not None and attempt > 1:
                request = self._request(json_bytes({**renumbered, "attempt": attempt}))
            try:
                ticket = pacer.acquire(cost, deadline)
            except BackendError as err:
                return _failure_json(err, attempt - 1)
            response = None
            try:
                response = self._attempt(request)
                if response.status != 429:  # a 429's hold comes with its release (limited), before any other goes
                    pacer.release(ticket, response.status, response.headers)
                self._check(response)
                outcome = _response_json(response, attempt)
                body = outcome.get("body")
                if self.usage is not None and isinstance(body, dict) and (usage := self.usage(body)):
                    pacer.spent(task, usage, size)
                return outcome
            except RetryableError as err:
                if response is None:
                    pacer.release(ticket, None, {})
                elif response.status == 429:
                    pacer.limited(ticket, err.retry_after, response.headers)
                    # The provider said how long (0 is no wait to speak of): the pacer holds every request that long,
                    # and no retry is spent.
                    if err.retry_after and time.monotonic() + err.retry_after <= deadline:
                        continue
                spent += 1
                stop = spent > self.retries or (err.started and not self.retry_after_send)
                if stop or (may_retry is not None and not may_retry()):
                    return _response_json(response, attempt) if response else _failure_json(err, attempt)
                # A 429's wait, when it said one, is the pacer's hold, which ends the request past the bound; a wait of
                # 0 s (or to a past date) is none said.
                if not (response is not None and response.status == 429 and err.retry_after):
                    time.sleep(err.retry_after or _backoff(spent))
            except BackendError as err:
                if response is None:
                    pacer.release(ticket, None, {})
                elif response.status == 429:  # never sent again (an agent's partial reply), its turn still held
                    pacer.limited(ticket, None, response.headers)
                return _response_json(response, attempt) if response else _failure_json(err, attempt)

    def _outcome(self, outcome: Mapping[str, Any]) -> tuple[Any, int]:
        """What the exchange gave the backend: the decoded reply and the attempts, or the BackendError it ended in."""
        attempt = outcome["attempts"]
        if "error" in outcome:
            raise BackendError(outcome["error"], outcome["reason"], attempts=attempt)
        status = outcome["status"]
        if "body" in outcome and 200 <= status < 300:
            return outcome["body"], attempt  # a success's JSON, as decoded when it came: nothing more to check
        raw = json_bytes(outcome["body"]) if "body" in outcome else outcome["text"].encode("utf-8", "surrogateescape")
        response = Response(status, "", "HTTP/1.1", dict(outcome["headers"]), raw)
        try:
            self._check(response)
        except BackendError as err:  # a retryable one is the last attempt's
            tried = f" ({attempt} attempts)" if isinstance(err, RetryableError) and attempt > 1 else ""
            raise StatusError(err.code, err.reason + tried, attempt, status, raw) from None
        try:
            return _decode(response, self.hidden), attempt
        except BackendError as err:
            err.attempts = attempt
            raise

    def close(self) -> None:
        """Close this thread's kept-alive connection, if it has one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()

    def _connection(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = Connection(**self._connection_args)
        return conn

    def _attempt(self, request: bytes) -> Response:
        conn = self._connection()
        deadline = time.monotonic() + self.timeout
        stage = "connect"
        try:
            reused = conn.is_idle()
            if not reused:
                conn.close()
                conn.open(deadline)
            stage = "request"
            try:
                return conn.exchange(request, deadline, self.max_response_bytes)
            except (PeerClosed, ConnectionResetError, BrokenPipeError):
                if not reused or conn.response_started:
                    raise
                # The agent closed an idle keep-alive connection: resend once on a new one.
                conn.close()
                stage = "connect"
                conn.open(deadline)
                stage = "request"
                return conn.exchange(request, deadline, self.max_response_bytes)
        except Exception as exc:
            conn.close()
            raise _classify(exc, stage, conn.response_started, self.timeout, self.max_response_bytes) from None

    def _check(self, response: Response) -> Response:
        status, body = response.status, response.body
        if status in AUTH_STATUSES:
            raise BackendError("reply:auth", f"{_status(status)}{self.error_text(body, self.hidden)}")
        if status in self.retry_statuses and not (self.final is not None and self.final(body)):
            wait = told_wait(status, response.headers, body, time.time())
            # A 429, or a 503 that says when to come back, turned the request away; a 502 or 504 may come after it
            # reached the agent.
            started = status != 429 and not (status == 503 and wait is not None)
            reason = f"{_status(status)}{self.error_text(body, self.hidden)}"
            raise RetryableError("reply:http-status", reason, wait, started=started)
        if not 200 <= status < 300:
            raise BackendError("reply:http-status", f"{_status(status)}{self.error_text(body, self.hidden)}")
        return response


def _recorded(outcome: Mapping[str, Any]) -> exchanges.Fields:
    """The fields an outcome as _sent gives it has: a failure's, or a response's with its body or its text."""
    if "error" in outcome:
        return FAILED
    return {**RESPONDED, **({} if "body" in outcome else {"text": exchanges.TEXT})}


def _response_json(response: Response, attempts: int) -> dict[str, Any]:
    """A response as a cassette holds it: the status, the headers that matter, the body decoded when it is a success's
    JSON, else as text (what an error quotes of it is then quoted alike on replay)."""
    outcome: dict[str, Any] = {
        "status": response.status,
        "headers": {name: value for name, value in response.headers.items() if name in KEPT_HEADERS},
        "attempts": attempts,
    }
    if 200 <= response.status < 300 and response.body.strip():
        try:
            body = json.loads(response.body)
        except (ValueError, RecursionError):
            pass
        else:
            if not too_deep(response.body, body):
                outcome["body"] = body
                return outcome
    outcome["text"] = response.body.decode("utf-8", "surrogateescape")
    return outcome


def _failure_json(err: BackendError, attempts: int) -> dict[str, Any]:
    """A failure with no response (no connection, a timeout, a reset) as a cassette holds it."""
    tried = f" ({attempts} attempts)" if isinstance(err, RetryableError) and attempts > 1 else ""
    return {"error": err.code, "reason": err.reason + tried, "attempts": attempts}


def _decode(response: Response, hidden: Secrets) -> Any:
    if not response.body.strip():
        raise BackendError("reply:not-json", f"HTTP {response.status} with an empty body")
    try:
        body = json.loads(response.body)
    except ValueError:
        raise UnreadError(
            "reply:not-json", f"HTTP {response.status} body is not JSON{snippet(response.body, hidden)}", response.body
        ) from None
    except RecursionError:
        raise BackendError("reply:not-json", f"HTTP {response.status} body is JSON nested too deeply to read") from None
    if too_deep(response.body, body):
        raise BackendError(
            "reply:not-json", f"HTTP {response.status} body is JSON nested more than {JSON_DEPTH} levels deep"
        )
    return body


def _classify(exc: Exception, stage: str, started: bool, timeout: float, limit: int) -> BackendError:
    """Turn a transport exception into an error a person can act on."""
    ssl = sys.modules.get("ssl")  # an SSLError can only come from an ssl that was imported
    if isinstance(exc, TooLarge):
        size = f" of {exc.declared} bytes" if exc.declared is not None else ""
        return BackendError("reply:too-large", f"HTTP {exc.status} body{size} is over the {limit}-byte limit")
    if isinstance(exc, (TimeoutError, socket.timeout)):
        if stage == "connect":
            return RetryableError("reply:connect", f"could not connect within {timeout:g}s", started=False)
        return RetryableError("reply:timeout", f"no complete reply within {timeout:g}s")
    if ssl is not None and isinstance(exc, ssl.SSLError):
        return BackendError("reply:tls", f"TLS failure: {getattr(exc, 'verify_message', None) or exc.reason or exc}")
    if isinstance(exc, ConnectionRefusedError):
        return RetryableError("reply:connect", "connection refused", started=False)
    if isinstance(exc, socket.gaierror):
        return RetryableError("reply:connect", f"cannot resolve the host ({exc.strerror})", started=False)
    if isinstance(exc, TunnelRefused):
        return RetryableError("reply:connect", str(exc), started=False)
    if isinstance(exc, (PeerClosed, ConnectionResetError, BrokenPipeError)):
        when = "before a complete reply" if started else "before replying"
        return RetryableError("reply:reset", f"the connection was closed or reset {when}", started=stage != "connect")
    if isinstance(exc, ProtocolError):
        return BackendError("reply:bad-http", f"not a valid HTTP response: {exc}")
    if isinstance(exc, OSError) and stage == "connect":
        return RetryableError("reply:connect", exc.strerror or str(exc), started=False)
    if isinstance(exc, OSError):
        return RetryableError("reply:reset", exc.strerror or str(exc))
    raise exc


def _proxy_for(scheme: str, host: str) -> tuple[tuple[str, int] | None, dict[str, str]]:
    """The proxy urllib would use for this URL (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) and its auth header."""
    # Elsewhere than macOS and Windows, urllib reads proxies from the environment alone: no import when none is set.
    if sys.platform not in ("darwin", "win32") and not any(name.lower().endswith("_proxy") for name in os.environ):
        return None, {}
    import urllib.request

    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None, {}
    try:
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        port = parts.port or 80
    except ValueError:
        raise ConfigError(f"{scheme.upper()}_PROXY: not a valid proxy URL: {redact_url(proxy)!r}") from None
    auth = {}
    if parts.username is not None:
        auth["Proxy-Authorization"] = basic_credentials(parts.username, parts.password)
    return (parts.hostname or "", port), auth


def _tls_context() -> Any:
    import ssl

    return ssl.create_default_context()


def _backoff(attempt: int) -> float:
    import random  # only a retry pays for it

    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _status(status: int) -> str:
    from http import HTTPStatus

    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def snippet(data: bytes, hidden: Secrets = NO_SECRETS) -> str:
    """`: <the body's start, on one line>`, its secrets masked before it is cut, or nothing for an empty body."""
    text = hidden.clip(data, SNIPPET_CHARS)
    return f": {text}" if text else ""
