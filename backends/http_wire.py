"""A small HTTP/1.1 client for one job: POST a body, read the whole reply, keep the connection.

http.client parses every response's headers with the email package and cannot bound a whole
exchange by one deadline; this reads exactly what it needs, and checks the deadline before every
send and receive, so a reply that drips in cannot outlast it.
"""

from __future__ import annotations

import re
import select
import socket
import time
from typing import Any

from harness.records import record

MAX_LINE = 65536
MAX_HEAD = 256 * 1024
MAX_HEADERS = 100
RECV_SIZE = 65536
# RFC 9112: a status line, a field line (token, colon, value without CTLs but HTAB), a chunk size line.
# A single LF ends the status line or a field line as well as CRLF (RFC 9112 section 2.2 lets a recipient accept it);
# the lines of chunked framing take CRLF only: a body's end must not be read two ways.
STATUS_LINE = re.compile(rb"(HTTP/1\.[0-9]) ([0-9]{3})(?: ([^\x00\r\n\x0b\x0c]*))?")
FIELD_LINE = re.compile(rb"([-!#$%&'*+.^_`|~0-9a-zA-Z]+):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*")
# The same field lines, matched without backtracking (the value's spaces are trimmed after), ended; and a whole head's.
FIELD_LINE_ENDED = re.compile(r"([-!#$%&'*+.^_`|~0-9a-zA-Z]+):([^\x00\r\n\x0b\x0c]*)\r?\n")  # in latin-1 text
FIELD_LINES = re.compile(rb"(?:[-!#$%&'*+.^_`|~0-9a-zA-Z]+:[^\x00\r\n\x0b\x0c]*\r?\n)*\r?\n")
CONTENT_LENGTH = re.compile(r"[0-9]{1,20}")
CHUNK_HEADER = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;[^\r\n]*)?[ \t]*\r\n")


class ProtocolError(Exception):
    """The peer's bytes are not an HTTP/1.x response."""


class PeerClosed(Exception):
    """The peer closed the connection before the response was complete."""


class TunnelRefused(OSError):
    """The proxy would not open a tunnel to the agent."""


class TooLarge(Exception):
    """The response body is over the limit; `declared` is its Content-Length when it gave one."""

    def __init__(self, status: int, declared: int | None) -> None:
        super().__init__(status, declared)
        self.status = status
        self.declared = declared


@record
class Response:
    """A complete HTTP response: status, headers (lower-case names) and body."""

    status: int
    reason: str
    version: str
    headers: dict[str, str]
    body: bytes


class Connection:
    """One keep-alive connection to an origin, directly or through a CONNECT tunnel, TLS or not."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        tls: Any = None,
        server_hostname: str = "",
        tunnel: bytes | None = None,
    ) -> None:
        self.address = address
        self.tls = tls
        self.server_hostname = server_hostname
        self.tunnel = tunnel
        self.sock: socket.socket | None = None
        self._readable: Any = None  # a poll object on the socket, where the platform has poll()
        self.response_started = False
        self._buffer = bytearray()

    @property
    def is_open(self) -> bool:
        return self.sock is not None

    def is_idle(self) -> bool:
        """Open, and nothing waiting on it: a peer that closed it or sent bytes nobody asked for makes it unusable."""
        if self.sock is None or self._buffer:
            return False
        if self.tls is not None:
            return True  # TLS has records of its own to read between replies; a closed one is caught when none comes
        # Readable between exchanges means an end of file or bytes nobody asked for; asking costs no syscall of the
        # socket's own, and leaves its timeout alone.
        if self._readable is not None:
            return not self._readable.poll(0)
        return not select.select([self.sock], [], [], 0)[0]

    def open(self, deadline: float) -> None:
        """Connect (and tunnel, and handshake) before the deadline."""
        sock = socket.create_connection(self.address, timeout=_remaining(deadline))
        self.sock = sock
        self._buffer.clear()
        if hasattr(select, "poll"):
            self._readable = select.poll()
            self._readable.register(sock, select.POLLIN)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tunnel is not None:
            self._send(self.tunnel, deadline)
            response = self._read_head(deadline)
            if not 200 <= response.status < 300:
                raise TunnelRefused(f"the proxy refused the tunnel: {response.status} {response.reason}".rstrip())
        if self.tls is not None:
            sock.settimeout(_remaining(deadline))
            self.sock = self.tls.wrap_socket(sock, server_hostname=self.server_hostname)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
            self._readable = None

    def exchange(self, request: bytes, deadline: float, limit: int) -> Response:
        """Send a whole request, read the whole response; the body is at most `limit` bytes."""
        self.response_started = False
        self._send(request, deadline)
        head = self._read_head(deadline)
        while 100 <= head.status < 200:  # interim responses (100 Continue) precede the real one
            head = self._read_head(deadline)
        headers = head.headers
        keep_alive = _keeps_alive(head)
        if head.status in (204, 304):  # never a body, whatever the framing headers say (RFC 9112 section 6.3)
            body = b""
        elif "transfer-encoding" in headers:  # beats Content-Length, which a proxy may have left behind
            body = self._read_chunked(head.status, deadline, limit)
        elif "content-length" in headers:
            length = _content_length(headers["content-length"])
            if length > limit:
                raise TooLarge(head.status, length)
            body = self._read_exact(length, deadline)
        else:
            body = self._read_to_close(head.status, deadline, limit)
            keep_alive = False
        if not keep_alive or self._buffer:  # bytes past the response: the connection cannot be trusted again
            self.close()
        return Response(head.status, head.reason, head.version, headers, body)

    def _send(self, data: bytes, deadline: float) -> None:
        assert self.sock is not None
        self.sock.settimeout(_remaining(deadline))
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> None:
        assert self.sock is not None
        self.sock.settimeout(_remaining(deadline))
        data = self.sock.recv(RECV_SIZE)
        if not data:
            raise PeerClosed
        self.response_started = True
        self._buffer += data

    def _read_line(self, deadline: float) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > MAX_LINE:
                raise ProtocolError("a header line over 64 KiB")
            self._fill(deadline)

    def _read_exact(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            self._fill(deadline)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _read_head(self, deadline: float) -> Response:
        # The whole head is taken in one piece: a line at a time costs more than the request itself.
        while True:
            first = self._buffer.find(b"\n")
            if first >= 0 and not self._buffer.startswith(b"HTTP/1."):
                raise ProtocolError("not an HTTP/1.x status line")
            end = _head_end(self._buffer, first)
            if end >= 0:
                break
            if len(self._buffer) > MAX_HEAD:
                raise ProtocolError("a response head over 256 KiB")
            self._fill(deadline)
        head = bytes(self._buffer[:end])
        del self._buffer[:end]
        status = STATUS_LINE.match(head)
        if status is None or head[status.end() : status.end() + 1] not in (b"\r", b"\n"):
            raise ProtocolError("not an HTTP/1.x status line")
        version, code, reason = status.groups()
        block = head[head.index(b"\n") + 1 :]
        if FIELD_LINES.fullmatch(block) and block.count(b"\n") <= MAX_HEADERS + 1:
            # The usual head, checked whole in one pass: no folded lines, every line a well-formed field; decoded whole,
            # not a name and a value at a time (a name is ASCII, which latin-1 reads alike).
            headers: dict[str, str] = {}
            for name, value in FIELD_LINE_ENDED.findall(block.decode("latin-1")):
                key, text = name.lower(), value.strip(" \t")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
        else:
            lines = [line[:-1] if line.endswith(b"\r") else line for line in block.split(b"\n")]
            headers = _fields([line for line in lines if line])
        _check_framing(headers)
        return Response(int(code), (reason or b"").decode("latin-1").strip(), version.decode(), headers, b"")

    def _read_chunked(self, status: int, deadline: float, limit: int) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            header = CHUNK_HEADER.fullmatch(self._read_line(deadline))
            if header is None:
                raise ProtocolError("a malformed chunk size")
            size = int(header.group(1), 16)
            if size == 0:
                trailers = []
                while line := self._read_line(deadline).rstrip(b"\n").removesuffix(b"\r"):
                    trailers.append(line)
                _fields(trailers)  # read and checked like headers, then dropped
                return b"".join(chunks)
            total += size
            if total > limit:
                raise TooLarge(status, None)
            chunks.append(self._read_exact(size, deadline))
            if self._read_line(deadline) != b"\r\n":
                raise ProtocolError("a chunk longer than its size")

    def _read_to_close(self, status: int, deadline: float, limit: int) -> bytes:
        while True:
            if len(self._buffer) > limit:
                raise TooLarge(status, None)
            try:
                self._fill(deadline)
            except PeerClosed:
                data = bytes(self._buffer)
                self._buffer.clear()
                return data


def _head_end(buffer: bytearray, first_newline: int) -> int:
    """Where the blank line that ends a response head ends, or -1 while it has not arrived."""
    if first_newline < 0:
        return -1
    crlf, lf = buffer.find(b"\n\r\n", first_newline), buffer.find(b"\n\n", first_newline)
    if crlf < 0 or 0 <= lf < crlf:  # the first blank line ends it, however its lines end
        return lf + 2 if lf >= 0 else -1
    return crlf + 3


def _remaining(deadline: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    return remaining


def _keeps_alive(head: Response) -> bool:
    tokens = head.headers.get("connection", "").lower()
    if head.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


def _fields(lines: list[bytes]) -> dict[str, str]:
    """Header lines as lower-case names to values; a line folded onto the next (obs-fold) joins it with a space."""
    unfolded: list[bytes] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not unfolded:
                raise ProtocolError("a folded header line with no header before it")
            unfolded[-1] += b" " + line.lstrip(b" \t")
        else:
            unfolded.append(line)
    if len(unfolded) > MAX_HEADERS:
        raise ProtocolError(f"more than {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    for line in unfolded:
        field = FIELD_LINE.fullmatch(line)
        if field is None:
            raise ProtocolError("a malformed header line")
        key, text = field.group(1).decode().lower(), field.group(2).decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


def _check_framing(headers: dict[str, str]) -> None:
    """Refuse framing headers that two readers could take two ways: the body's end must be beyond doubt."""
    if "content-length" in headers:
        _content_length(headers["content-length"])
    if headers.get("transfer-encoding", "chunked").lower() != "chunked":  # also a repeated one, joined by commas
        raise ProtocolError(f"a Transfer-Encoding other than chunked: {headers['transfer-encoding']}")


def _content_length(value: str) -> int:
    if value.isascii() and value.isdigit() and len(value) <= 20:
        return int(value)
    # A repeated header arrives joined ("10, 10"); repeats must agree.
    values = {part.strip() for part in value.split(",")}
    text = values.pop()
    if values or not CONTENT_LENGTH.fullmatch(text):
        raise ProtocolError("an invalid Content-Length")
    return int(text)
