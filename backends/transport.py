"""POST JSON over HTTP(S): keep-alive per thread, a deadline per request, retries, a size cap."""

from __future__ import annotations

import base64
import http.client
import json
import random
import socket
import threading
import time
import urllib.request
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from config import HARNESS_VERSION, redact_url
from records import BackendError

RETRY_STATUSES = frozenset({429, 502, 503, 504})
AUTH_STATUSES = frozenset({401, 403})
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
RETRY_AFTER_CAP = 60.0
SNIPPET_CHARS = 200
READ_CHUNK = 64 * 1024
WATCHDOG_TICK = 0.05


class RetryableError(BackendError):
    """A failure worth another attempt: a connection error, a timeout, 429 or a 50x."""

    def __init__(self, code: str, reason: str, retry_after: float | None = None) -> None:
        super().__init__(code, reason)
        self.retry_after = retry_after


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
    ) -> None:
        parts = urlsplit(url)
        self.shown_url = redact_url(url)
        self.timeout = timeout
        self.retries = retries
        self.max_response_bytes = max_response_bytes
        self.retry_statuses = retry_statuses
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"agent-eval-harness/{HARNESS_VERSION}",
        }
        if parts.username is not None:
            self.headers["Authorization"] = _basic(parts.username, parts.password)
        self.headers.update(headers)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.proxy, self.proxy_headers = _proxy_for(parts.scheme, self.host)
        if self.proxy and not self.tls:
            self.headers.update(self.proxy_headers)
        origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        # Through a plain-HTTP proxy the request line carries the absolute URL; through a tunnel, the path.
        self.target = origin + path if self.proxy and not self.tls else path
        self._local = threading.local()
        self._watchdog = _Watchdog()

    def post_json(self, payload: Mapping[str, Any]) -> tuple[Any, int]:
        """The decoded JSON reply and the number of attempts it took."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            attempt += 1
            try:
                status, data = self._attempt(body)
                return _decode(status, data), attempt
            except RetryableError as err:
                if attempt > self.retries:
                    tried = f" ({attempt} attempts)" if attempt > 1 else ""
                    raise BackendError(err.code, err.reason + tried, attempts=attempt) from None
                time.sleep(err.retry_after if err.retry_after is not None else _backoff(attempt))
            except BackendError as err:
                err.attempts = attempt
                raise

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            host, port = self.proxy or (self.host, self.port)
            if self.tls:
                import ssl

                conn = http.client.HTTPSConnection(host, port, timeout=self.timeout, context=ssl.create_default_context())
            else:
                conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
            if self.proxy and self.tls:
                conn.set_tunnel(self.host, self.port, headers=self.proxy_headers)
            self._local.conn = conn
        return conn

    def _attempt(self, body: bytes) -> tuple[int, bytes]:
        conn = self._connection()
        deadline = time.monotonic() + self.timeout
        stage = "connect"
        with self._watchdog.watch(conn, deadline) as watch:
            try:
                reused = conn.sock is not None
                if not reused:
                    conn.connect()
                stage = "request"
                try:
                    response = self._exchange(conn, body)
                except (ConnectionResetError, BrokenPipeError):
                    if not reused:
                        raise
                    # The agent closed an idle keep-alive connection: resend once on a new one.
                    conn.close()
                    stage = "connect"
                    conn.connect()
                    stage = "request"
                    response = self._exchange(conn, body)
                stage = "read"
                data = self._read_body(conn, response, response.status)
                if watch.fired:
                    raise TimeoutError
                return response.status, data
            except BackendError:
                raise
            except Exception as exc:
                conn.close()
                raise _classify(exc, stage, watch.fired, self.timeout) from None

    def _exchange(self, conn: http.client.HTTPConnection, body: bytes) -> http.client.HTTPResponse:
        conn.request("POST", self.target, body, self.headers)
        return conn.getresponse()

    def _read_body(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, status: int) -> bytes:
        limit = self.max_response_bytes
        length = response.getheader("Content-Length", "")
        if length.isdigit() and int(length) > limit:
            conn.close()
            raise BackendError("reply:too-large", f"HTTP {status} body of {length} bytes is over the {limit}-byte limit")
        chunks, size = [], 0
        while True:
            chunk = response.read(READ_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                conn.close()
                raise BackendError("reply:too-large", f"HTTP {status} body is over the {limit}-byte limit")
            chunks.append(chunk)
        if response.length:
            # http.client ends a body cut short by the peer quietly; a truncated reply is no reply.
            raise http.client.IncompleteRead(b"".join(chunks), response.length)
        data = b"".join(chunks)
        if status in AUTH_STATUSES:
            raise BackendError("reply:auth", f"HTTP {status} {_status_text(status)}: the agent rejected the credentials{_snippet(data)}")
        if status in self.retry_statuses:
            wait = retry_after_seconds(response.getheader("Retry-After"), time.time())
            raise RetryableError("reply:http-status", f"HTTP {status} {_status_text(status)}{_snippet(data)}", wait)
        if not 200 <= status < 300:
            raise BackendError("reply:http-status", f"HTTP {status} {_status_text(status)}{_snippet(data)}")
        return data


def _decode(status: int, data: bytes) -> Any:
    if not data.strip():
        raise BackendError("reply:not-json", f"HTTP {status} with an empty body")
    try:
        return json.loads(data)
    except ValueError:
        raise BackendError("reply:not-json", f"HTTP {status} body is not JSON{_snippet(data)}") from None


def _classify(exc: Exception, stage: str, timed_out: bool, timeout: float) -> BackendError:
    """Turn a transport exception into an error a person can act on."""
    import ssl

    if timed_out or isinstance(exc, (TimeoutError, socket.timeout)):
        if stage == "connect":
            return RetryableError("reply:connect", f"could not connect within {timeout:g}s")
        return RetryableError("reply:timeout", f"no complete reply within {timeout:g}s")
    if isinstance(exc, ssl.SSLError):
        return BackendError("reply:tls", f"TLS failure: {getattr(exc, 'verify_message', None) or exc.reason or exc}")
    if isinstance(exc, ConnectionRefusedError):
        return RetryableError("reply:connect", "connection refused")
    if isinstance(exc, socket.gaierror):
        return RetryableError("reply:connect", f"cannot resolve the host ({exc.strerror})")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, http.client.IncompleteRead)):
        when = "before a complete reply" if stage == "read" else "before replying"
        return RetryableError("reply:reset", f"the connection was closed or reset {when}")
    if isinstance(exc, http.client.HTTPException):
        return BackendError("reply:bad-http", f"not a valid HTTP response ({type(exc).__name__})")
    if isinstance(exc, OSError) and stage == "connect":
        return RetryableError("reply:connect", exc.strerror or str(exc))
    if isinstance(exc, OSError):
        return RetryableError("reply:reset", exc.strerror or str(exc))
    raise exc


def _proxy_for(scheme: str, host: str) -> tuple[tuple[str, int] | None, dict[str, str]]:
    """The proxy urllib would use for this URL (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) and its auth header."""
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return None, {}
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    auth = {"Proxy-Authorization": _basic(parts.username, parts.password)} if parts.username is not None else {}
    return (parts.hostname or "", parts.port or 80), auth


def _basic(username: str, password: str | None) -> str:
    credentials = f"{unquote(username)}:{unquote(password or '')}"
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def _backoff(attempt: int) -> float:
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds to wait per a Retry-After header (seconds or an HTTP date), capped; None when absent or unreadable."""
    value = (value or "").strip()
    if value.isdigit():
        return min(float(value), RETRY_AFTER_CAP)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, min(when - now, RETRY_AFTER_CAP))


def _status_text(status: int) -> str:
    return http.client.responses.get(status, "")


def _snippet(data: bytes) -> str:
    text = " ".join(data[: SNIPPET_CHARS * 4].decode("utf-8", "replace").split())[:SNIPPET_CHARS]
    return f": {text}" if text else ""


class _Watch:
    """One request under the watchdog; fired is True once its deadline cut it off."""

    def __init__(self, watchdog: _Watchdog, conn: http.client.HTTPConnection, deadline: float) -> None:
        self.watchdog = watchdog
        self.conn = conn
        self.deadline = deadline
        self.fired = False

    def __enter__(self) -> _Watch:
        self.watchdog.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.watchdog.remove(self)


class _Watchdog:
    """One thread that cuts off requests past their deadline: a slow drip cannot outlast EVAL_TIMEOUT."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[_Watch] = set()
        self._thread: threading.Thread | None = None

    def watch(self, conn: http.client.HTTPConnection, deadline: float) -> _Watch:
        return _Watch(self, conn, deadline)

    def add(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.add(watch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="eval-deadlines", daemon=True)
                self._thread.start()

    def remove(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def _run(self) -> None:
        while True:
            time.sleep(WATCHDOG_TICK)
            now = time.monotonic()
            with self._lock:
                for watch in self._watches:
                    if not watch.fired and now >= watch.deadline:
                        watch.fired = True
                        sock = watch.conn.sock
                        if sock is not None:
                            try:
                                # The plain-socket shutdown wakes a blocked read, TLS or not.
                                socket.socket.shutdown(sock, socket.SHUT_RDWR)
                            except OSError:
                                pass
