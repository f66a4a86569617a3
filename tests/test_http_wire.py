"""The HTTP/1.1 client against a raw loopback socket server that sends exactly the bytes a test gives."""

from __future__ import annotations

import socket
import threading
import time
import unittest

from backends.http_wire import Connection, PeerClosed, ProtocolError, TooLarge

REQUEST = b"POST /run HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
LIMIT = 1000


class RawServer:
    """Accepts connections on 127.0.0.1; answers each request (its head and 2-byte body) with the next script entry."""

    def __init__(self, *replies: bytes, close_after: bool = False) -> None:
        self.replies = list(replies)
        self.close_after = close_after
        self.accepted = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return self.listener.getsockname()

    def serve(self) -> None:
        while self.replies:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            with sock:
                sock.settimeout(10)
                while self.replies:
                    received = b""
                    while not received.endswith(b"\r\n\r\n{}"):
                        chunk = sock.recv(65536)
                        if not chunk:
                            break
                        received += chunk
                    if not received:
                        break
                    sock.sendall(self.replies.pop(0))
                    if self.close_after:
                        break

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=10)


class Exchange(unittest.TestCase):
    def exchange(self, *replies: bytes, requests: int = 1, close_after: bool = False) -> list:
        server = RawServer(*replies, close_after=close_after)
        self.addCleanup(server.close)
        conn = Connection(server.address)
        self.addCleanup(conn.close)
        deadline = time.monotonic() + 10
        conn.open(deadline)
        self.server = server
        self.conn = conn
        return [conn.exchange(REQUEST, deadline, LIMIT) for _ in range(requests)]

    def test_a_content_length_body_and_a_kept_connection(self) -> None:
        ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        first, second = self.exchange(ok, ok, requests=2)
        self.assertEqual((first.status, first.reason, first.body, second.body), (200, "OK", b"{}", b"{}"))
        self.assertEqual(first.headers["content-type"], "application/json")
        self.assertEqual(self.server.accepted, 1)

    def test_a_chunked_body_with_extensions_and_trailers(self) -> None:
        (response,) = self.exchange(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'4;x=y\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n'
        )
        self.assertEqual(response.body, b'{"a": 1}')
        self.assertTrue(self.conn.is_open)

    def test_interim_100_continue_is_skipped(self) -> None:
        (response,) = self.exchange(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
        self.assertEqual((response.status, response.body), (201, b"{}"))

    def test_a_body_delimited_by_close_ends_the_connection(self) -> None:
        (response,) = self.exchange(b'HTTP/1.0 200 OK\r\n\r\n{"refused": true}', close_after=True)
        self.assertEqual(response.body, b'{"refused": true}')
        self.assertFalse(self.conn.is_open)

    def test_connection_close_is_honoured(self) -> None:
        self.exchange(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", close_after=True)
        self.assertFalse(self.conn.is_open)

    def test_protocol_errors(self) -> None:
        cases = [
            (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not an HTTP/1.x status line"),
            (b"HTTP/1.1 2000 OK\r\n\r\n", "not an HTTP/1.x status line"),
            (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "a malformed header line"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "an invalid Content-Length"),
            (b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}", "an invalid Content-Length"),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "a malformed chunk size"),
            (b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", "more than 100 headers"),
        ]
        for reply, message in cases:
            with self.subTest(message):
                with self.assertRaises(ProtocolError) as caught:
                    self.exchange(reply, close_after=True)
                self.assertEqual(str(caught.exception), message)

    def test_bodies_over_the_limit(self) -> None:
        cases = [
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1001\r\n\r\n", 1001),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n" + b"x" * 1001 + b"\r\n0\r\n\r\n", None),
            (b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 1001, None),
        ]
        for reply, declared in cases:
            with self.subTest(declared=declared):
                with self.assertRaises(TooLarge) as caught:
                    self.exchange(reply, close_after=True)
                self.assertEqual((caught.exception.status, caught.exception.declared), (200, declared))

    def test_a_body_cut_short_is_peer_closed_after_the_response_started(self) -> None:
        with self.assertRaises(PeerClosed):
            self.exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", close_after=True)
        self.assertTrue(self.conn.response_started)

    def test_bytes_past_a_response_end_the_connection(self) -> None:
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
        (response,) = self.exchange(ok + ok, close_after=True)  # one request, two responses in one write
        self.assertEqual(response.body, b"{}")
        self.assertFalse(self.conn.is_open, "a second, unrequested response must not be read as the next reply")

    def test_a_connection_the_peer_closed_is_not_idle(self) -> None:
        self.exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", close_after=True)
        self.server.thread.join(timeout=10)  # the server has closed its side
        for _ in range(100):
            if not self.conn.is_idle():
                break
            time.sleep(0.01)
        self.assertFalse(self.conn.is_idle())


if __name__ == "__main__":
    unittest.main()
