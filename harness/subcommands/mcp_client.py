"""Fetch the tool surface of a live MCP server, over stdio or Streamable HTTP, with every wait bounded."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from harness import __version__
from harness.endpoints import basic_credentials, command_secrets, header_secrets, redact_url, url_secrets
from harness.leaks import NO_SECRETS, Secrets
from harness.records import Unreachable

PROTOCOL_VERSION = "2025-06-18"
MAX_PAGES = 100
SHUTDOWN_WAIT = 2.0  # seconds a stdio server gets to exit after each step of its shutdown


class McpError(Unreachable):
    """The MCP server could not be reached or did something wrong; the message says what (exit 3)."""


def fetch_tools(session: StdioSession | HttpSession) -> list[dict[str, Any]]:
    """initialize, notifications/initialized, then tools/list page by page; what the server says, its secrets masked."""
    try:
        return _fetch_tools(session)
    except McpError as err:
        raise McpError(session.secrets.mask(str(err))) from None


def _fetch_tools(session: StdioSession | HttpSession) -> list[dict[str, Any]]:
    with session:
        session.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "agent-eval-harness", "version": __version__},
            },
        )
        session.notify("notifications/initialized")
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_PAGES):
            result = session.request("tools/list", {"cursor": cursor} if cursor else {})
            page = result.get("tools")
            if not isinstance(page, list) or not all(
                isinstance(tool, dict) and isinstance(tool.get("name"), str) for tool in page
            ):
                shown = session.secrets.clip(json.dumps(result), 200)
                raise McpError(f"the MCP server answered tools/list without a list of named tools: {shown}")
            tools += page
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
        raise McpError(f"the MCP server kept paging tools/list past {MAX_PAGES} pages")


class _Session:
    """JSON-RPC ids and the checks every reply gets."""

    def __init__(self, timeout: float, secrets: Secrets = NO_SECRETS) -> None:
        self.timeout = timeout
        self.next_id = 0
        self.secrets = secrets  # masked in whatever the server says back

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Shut the session down."""

    def notification(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}

    def message(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """A request: a notification with the next id, which its reply carries back."""
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, **self.notification(method, params)}

    def result(self, method: str, reply: Any) -> dict[str, Any]:
        if not isinstance(reply, dict):
            shown = self.secrets.clip(json.dumps(reply), 200)
            raise McpError(f"the MCP server answered {method} with {shown}, not a JSON-RPC object")
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise McpError(f"the MCP server answered {method} with error {error.get('code')}: {error.get('message')}")
        if not isinstance(reply.get("result"), dict):
            raise McpError(f"the MCP server answered {method} without a result object")
        return reply["result"]


class StdioSession(_Session):
    """A server started as a process: newline-delimited JSON-RPC on its stdin and stdout, its stderr passed through."""

    def __init__(self, argv: Sequence[str], timeout: float) -> None:
        super().__init__(timeout, Secrets(command_secrets(argv[1:], "--mcp-command")))
        self.argv = list(argv)
        try:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
        except OSError as exc:
            raise McpError(f"cannot start the MCP server {self.argv[0]}: {exc.strerror or exc}") from None
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.put(line)
        self.lines.put(b"")

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            # The server is gone, or going: the reply the next request waits for says so, whichever write noticed first.
            pass

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send(self.notification(method, params))

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message = self.message(method, params)
        self._send(message)
        while True:
            try:
                line = self.lines.get(timeout=self.timeout)
            except queue.Empty:
                raise McpError(f"the MCP server sent no reply to {method} within {self.timeout:g}s") from None
            if not line:
                try:
                    code = self.process.wait(timeout=1)  # its stdout closed: it is exiting, or has
                except subprocess.TimeoutExpired:
                    code = None
                raise McpError(
                    f"the MCP server closed its stdout before answering {method}"
                    + (f" (exit code {code})" if code is not None else "")
                )
            try:
                reply = json.loads(line)
            except ValueError:
                raise McpError(
                    "the MCP server wrote a line that is not JSON on stdout: " + self.secrets.clip(line, 200)
                ) from None
            if isinstance(reply, dict) and "method" in reply:
                if "id" in reply:  # a request of the server's own (ping, sampling...): we offer none
                    self._send(
                        {
                            "jsonrpc": "2.0",
                            "id": reply["id"],
                            "error": {"code": -32601, "message": "not supported by this client"},
                        }
                    )
                continue
            if isinstance(reply, dict) and reply.get("id") == message["id"]:
                return self.result(method, reply)

    def close(self) -> None:
        """Close stdin, then terminate, then kill: each step waits at most the timeout, and 2 s at the most."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
        for stop in (None, self.process.terminate, self.process.kill):
            if stop is not None:
                stop()
            try:
                self.process.wait(timeout=min(self.timeout, SHUTDOWN_WAIT))
                return
            except subprocess.TimeoutExpired:
                continue


class HttpSession(_Session):
    """A server at a Streamable HTTP endpoint: POSTs answered with JSON or an event stream, in a session."""

    def __init__(self, url: str, timeout: float, headers: Mapping[str, str] | None = None) -> None:
        headers = dict(headers or {})
        super().__init__(timeout, Secrets(url_secrets(url, "--mcp-url") | header_secrets(headers, "--mcp-header")))
        self.shown_url = redact_url(url)
        parts = urlsplit(url)
        if parts.username is not None:  # sent as Basic credentials, as the http backend sends them, unless a header is
            headers = {"Authorization": basic_credentials(parts.username, parts.password), **headers}
            url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        self.url = url
        self.headers = headers
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    def _post(self, message: dict[str, Any]) -> Any:
        import urllib.error
        import urllib.request

        headers = {**self.headers, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(), headers=headers, method="POST")
        what = message.get("method", "a message")
        try:
            response = urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            raise McpError(
                f"the MCP server answered {what} with HTTP {exc.code}: "
                + self.secrets.clip(exc.read(self.secrets.reach(200)), 200)
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise McpError(f"cannot reach the MCP server at {self.shown_url}: {reason}") from None
        with response:
            self.session_id = response.headers.get("Mcp-Session-Id") or self.session_id
            if "id" not in message:
                return None
            kind = response.headers.get("Content-Type", "").split(";")[0].strip()
            try:
                if kind == "text/event-stream":
                    return self._from_events(response, message["id"], what)
                return json.loads(response.read())
            except TimeoutError:
                raise McpError(f"the MCP server sent no reply to {what} within {self.timeout:g}s") from None
            except ValueError:
                raise McpError(f"the MCP server answered {what} with a body that is not JSON") from None

    def _from_events(self, stream: Any, wanted: int, what: str) -> Any:
        data: list[str] = []
        for raw in stream:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif not line and data:
                event = json.loads("\n".join(data))
                data = []
                if isinstance(event, dict) and event.get("id") == wanted and "method" not in event:
                    return event
        raise McpError(f"the MCP server's event stream ended without a reply to {what}")

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._post(self.notification(method, params))

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.result(method, self._post(self.message(method, params)))
        if method == "initialize":
            self.protocol_version = result.get("protocolVersion") or PROTOCOL_VERSION
        return result

    def close(self) -> None:
        """End the session on the server (DELETE), as the transport asks; a server may refuse, which is fine."""
        if not self.session_id:
            return
        import urllib.request

        headers = {**self.headers, "Mcp-Session-Id": self.session_id}
        request = urllib.request.Request(self.url, headers=headers, method="DELETE")
        try:
            urllib.request.urlopen(request, timeout=self.timeout).close()
        except OSError:
            pass
