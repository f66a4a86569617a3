"""backends/http_wire.py against h11, a well-kept HTTP/1.1 parser: for the same response bytes, both read the same
status and body, or both refuse them. Where they differ on purpose, DIFFER_ON_PURPOSE says why."""

from __future__ import annotations

import socket
import time
import unittest
from typing import Any

import h11
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from backends.http_wire import Connection, PeerClosed, ProtocolError, TooLarge

REQUEST = b"POST /run HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
LIMIT = 1 << 20
Verdict = tuple[int, bytes] | str  # (status, body), or "refused"


def ours(raw: bytes) -> Verdict:
    """What our client reads of these bytes, sent by a peer that then closes."""
    mine, theirs = socket.socketpair()
    with mine, theirs:
        theirs.sendall(raw)
        theirs.shutdown(socket.SHUT_WR)
        conn = Connection(("unused", 0))
        conn.sock = mine
        try:
            response = conn.exchange(REQUEST, time.monotonic() + 10, LIMIT)
        except (ProtocolError, PeerClosed, TooLarge):
            return "refused"
        return response.status, response.body


def h11s(raw: bytes) -> Verdict:
    """What h11 reads of the same bytes, as the client of the same request."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=LIMIT)
    conn.send(h11.Request(method="POST", target="/run", headers=[("Host", "x"), ("Content-Length", "2")]))
    conn.send(h11.Data(data=b"{}"))
    conn.send(h11.EndOfMessage())
    conn.receive_data(raw)
    conn.receive_data(b"")
    status, body = 0, b""
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, body
            elif event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return "refused"
    except h11.RemoteProtocolError:
        return "refused"


# (name, bytes, why the two readers differ): differences kept on purpose.
DIFFER_ON_PURPOSE: list[tuple[str, bytes, str]] = [
    (
        "an HTTP/2.0 status line",
        b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        "h11 reads any d.d version; a peer that answers an HTTP/1.1 request in HTTP/1 framing while naming major "
        "version 2 is not speaking HTTP/1.x (RFC 9112 section 2.3), so ours refuses it",
    ),
]

# Responses that once tripped one reader or the other; the generated ones below explore around them.
EDGES = [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\n{}\n0\n\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
    b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.0 200 OK\r\n\r\nread to close",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x",
    b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\n Content-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nX-A: a\r\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\n{}\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{} \r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer\r\n\r\n",
    b"HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nX-Info: a\r\n Content-Length: 9\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\n: empty name\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 2000 OK\r\n\r\n",
    b"HTTP/1.1 20 OK\r\n\r\n",
    b"HTTP/2 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\n{"a"\r\n0\r\nX-Trailer: t\r\n\r\n',
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}x\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{",
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra bytes",
    b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    b"",
]

tokens = st.sampled_from(["Content-Length", "content-length", "CONTENT-LENGTH", "Transfer-Encoding", "X-A", "X A", ""])
values = st.sampled_from(
    [
        "2",
        "3",
        "0",
        "2, 2",
        "+2",
        "-1",
        "\xb2",
        "chunked",
        "Chunked",
        "gzip, chunked",
        "identity",
        "a\x00b",
        "a\x1bb",
        "",
    ]
)
chunked_bodies = st.sampled_from(
    [
        b"2\r\n{}\r\n0\r\n\r\n",
        b"2;ext=1\r\n{}\r\n0\r\nT: t\r\n\r\n",
        b"2\r\n{}",
        b"3\r\n{}\r\n0\r\n\r\n",
        b"x\r\n",
        b"0\r\n\r\n",
        b"-2\r\n{}\r\n0\r\n\r\n",
        b"2\n{}\n0\n\n",
        b"1\r\n{}\r\n0\r\n\r\n",
    ]
)


@st.composite
def responses(draw: Any) -> bytes:
    """A response head and body near what servers send: real framing headers, case, folding, bad values, cut bodies."""
    newline = draw(st.sampled_from([b"\r\n", b"\n"]))
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0"]))
    status = draw(st.sampled_from([b"200", b"201", b"204", b"304", b"404", b"500", b"100", b"2000"]))
    lines = [version + b" " + status + draw(st.sampled_from([b" OK", b"", b" "]))]
    for _ in range(draw(st.integers(0, 4))):
        name, value = draw(tokens), draw(values)
        line = f"{name}: {value}".encode("latin-1")  # a byte per character, as on the wire
        lines.append(b" " + line if draw(st.integers(0, 9)) == 0 else line)  # now and then a folded line
    body = draw(st.sampled_from([b"{}", b"", b"{}x", b"{"]) | chunked_bodies)
    return newline.join(lines) + newline + newline + body


class AgainstH11(unittest.TestCase):
    def assert_agree(self, raw: bytes) -> None:
        if any(raw == case for _, case, _ in DIFFER_ON_PURPOSE):
            return
        self.assertEqual(ours(raw), h11s(raw), raw)

    def test_the_edge_cases(self) -> None:
        for raw in EDGES:
            with self.subTest(raw[:60]):
                self.assert_agree(raw)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(responses())
    @example(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    def test_generated_responses(self, raw: bytes) -> None:
        self.assert_agree(raw)

    def test_every_difference_kept_on_purpose_is_still_a_difference(self) -> None:
        for name, raw, _ in DIFFER_ON_PURPOSE:
            with self.subTest(name):
                self.assertNotEqual(ours(raw), h11s(raw))


if __name__ == "__main__":
    unittest.main()
