"""The command backend: an agent without a server, run once per task with the request on stdin and its reply on stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
from collections import deque
from typing import IO, Any

from backends.contract import parse_reply
from backends.http_agent import request_body
from harness.config import Config
from harness.records import AgentRequest, BackendError, Reply

STDERR_LINES = 5
READ_CHUNK = 65536


class CommandAgentBackend:
    """Each task: a fresh process in a fresh temporary folder, the http backend's JSON body in, the reply contract out."""

    def __init__(self, config: Config) -> None:
        self.argv = config.agent_cmd
        self.timeout = config.timeout
        self.max_output_bytes = config.max_response_bytes
        self.run_id = config.run_id
        self.extra = dict(config.agent_body)

    def describe(self) -> dict[str, Any]:
        return {"command": self.argv[0], "timeout": self.timeout, "maxResponseBytes": self.max_output_bytes}

    def run(self, request: AgentRequest) -> Reply:
        """Run the command once; a timeout, a non-zero exit or a reply that breaks the contract is an error."""
        body = json.dumps(request_body(request, self.run_id, self.extra), ensure_ascii=False).encode("utf-8")
        with tempfile.TemporaryDirectory(prefix="eval-agent-") as folder:
            try:
                # A session of its own, so that a timeout can end the agent and everything it started.
                proc = subprocess.Popen(
                    self.argv, cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
                )
            except OSError as exc:
                raise BackendError("reply:command-start", f"cannot start {self.argv[0]}: {exc.strerror or exc}") from None
            stdout, stderr, too_large = bytearray(), deque(maxlen=STDERR_LINES), threading.Event()
            readers = [
                threading.Thread(target=_read_capped, args=(proc.stdout, stdout, self.max_output_bytes, too_large, proc), daemon=True),
                threading.Thread(target=_read_lines, args=(proc.stderr, stderr), daemon=True),
            ]
            for reader in readers:
                reader.start()
            try:
                _write_stdin(proc, body)
                code = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise BackendError("reply:timeout", f"no reply within {self.timeout:g}s; the command and its children were killed") from None
            finally:
                for reader in readers:
                    reader.join(timeout=5)
            if too_large.is_set():
                raise BackendError("reply:too-large", f"the command printed over {self.max_output_bytes} bytes")
            if code != 0:
                last = " | ".join(line.decode("utf-8", "replace").rstrip() for line in stderr)
                raise BackendError("reply:command-exit", f"the command exited with {code}{': ' + last if last else ''}")
        if not stdout.strip():
            raise BackendError("reply:not-json", "the command printed nothing")
        try:
            return parse_reply(json.loads(stdout))
        except (ValueError, RecursionError):
            raise BackendError("reply:not-json", f"the command's output is not JSON: {bytes(stdout[:200]).decode('utf-8', 'replace')}") from None


def _write_stdin(proc: subprocess.Popen[bytes], body: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(body)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the agent did not read its input; its exit and output tell the rest


def _read_capped(stream: IO[bytes] | None, into: bytearray, limit: int, too_large: threading.Event, proc: subprocess.Popen[bytes]) -> None:
    assert stream is not None
    while chunk := stream.read1(READ_CHUNK):  # type: ignore[attr-defined]
        into += chunk
        if len(into) > limit:
            too_large.set()
            _kill_group(proc)
            return


def _read_lines(stream: IO[bytes] | None, into: deque[bytes]) -> None:
    assert stream is not None
    for line in stream:
        into.append(line)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
