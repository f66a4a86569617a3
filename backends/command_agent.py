"""The command backend: an agent without a server, run once per task, the request on its stdin, its reply on stdout."""

from __future__ import annotations

import atexit
import json
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

from backends.contract import parse_reply, partial_reply
from backends.http_agent import request_body
from backends.options import (
    AGENT_CMD,
    COMMAND,
    MAX_RESPONSE_BYTES,
    MODEL_PROXY,
    REQUEST_FIELDS,
    TIMEOUT,
    TOOL_SERVER_URL,
    Serving,
    serving,
)
from harness import exchanges
from harness.endpoints import command_secrets, field_secrets, query_values, shown_args, shown_fields
from harness.leaks import NO_SECRETS, Secrets, strings
from harness.records import AgentRequest, AgentSurface, BackendError, Reply, record
from harness.settings import Sources
from harness.text import json_bytes

if TYPE_CHECKING:
    import subprocess

STDERR_LINES = 5
STDERR_LINE_BYTES = 65536  # of each: past what the clip of a reason reads, so no secret is cut where it shows
READ_CHUNK = 65536
READ_GRACE = 5.0  # seconds, a bound: once the command's group has ended, its output is read to what is waiting
POLL = 0.05  # seconds between looks at whether the command has ended, while its output is quiet
# The process groups of the commands running now, each ended when its command is done; those left when the run ends
# (a Ctrl-C while workers run them) are ended then.
RUNNING: set[int] = set()
MODEL_BASE_URL = "EVAL_MODEL_BASE_URL"  # where a command's model client is to send its calls, when the run proxies them
RECORDED = exchanges.answer_or_failure({"stdout": exchanges.TEXT})  # as _ran gives it


@record
class CommandSettings:
    """The command, what to add to each request, how long to wait and how much to read."""

    argv: tuple[str, ...]
    fields: Mapping[str, Any]
    timeout: float
    max_response_bytes: int
    serving: Serving | None  # None: the run serves no tools (EVAL_TOOL_SERVER=off)
    model_proxy: str | None = None  # the upstream the run proxies the agent's model calls to


class CommandAgentBackend:
    """Each task: a fresh process in a fresh temporary folder, the http body on stdin, the reply contract on stdout."""

    NAME = "command"
    PLAYS_TOOLS = False
    SETTINGS = COMMAND

    @classmethod
    def configure(cls, sources: Sources) -> CommandSettings:
        """The command (required), the extra request fields, the timeout and the output cap."""
        return CommandSettings(
            argv=sources.require(AGENT_CMD, cls.NAME),
            fields=sources.get(REQUEST_FIELDS),
            timeout=sources.get(TIMEOUT),
            max_response_bytes=sources.get(MAX_RESPONSE_BYTES),
            serving=serving(sources),
            model_proxy=sources.get(MODEL_PROXY),
        )

    def __init__(
        self, settings: CommandSettings, surface: AgentSurface, run_id: str, hidden: Secrets = NO_SECRETS
    ) -> None:
        self.argv = settings.argv
        self.timeout = settings.timeout
        self.max_output_bytes = settings.max_response_bytes
        self.run_id = run_id
        self.fields = dict(settings.fields)
        self.tools = {tool.name: tool for tool in surface.tools}
        self._secrets = command_secrets(self.argv[1:], AGENT_CMD.var) | field_secrets(self.fields, REQUEST_FIELDS.var)
        queries = query_values(self.argv[1:], AGENT_CMD.var) | query_values(strings(self.fields), REQUEST_FIELDS.var)
        self.hidden = hidden | Secrets(self._secrets) | Secrets(queries)
        # A command served no tools is told of no server: the setting EVAL_TOOL_SERVER_URL (a base URL) is not one.
        unserved = TOOL_SERVER_URL.var in os.environ
        self._unserved_env = {k: v for k, v in os.environ.items() if k != TOOL_SERVER_URL.var} if unserved else None
        atexit.register(_end_all)

    def secrets(self) -> dict[str, str]:
        """The values of credential-like options and body fields, and the credentials in the URLs among them."""
        return self._secrets

    def describe(self) -> dict[str, Any]:
        return {
            "command": self.argv[0],
            "args": shown_args(self.argv[1:]),
            **({"body": shown_fields(self.fields)} if self.fields else {}),
            "timeout": self.timeout,
            "maxResponseBytes": self.max_output_bytes,
        }

    def run(self, request: AgentRequest) -> Reply:
        """Run the command once; a timeout, a non-zero exit or a reply that breaks the contract is an error."""
        payload = request_body(request, self.run_id, self.fields, self.tools)
        outcome = exchanges.exchange(
            lambda: {"body": payload},
            lambda: self._ran(json_bytes(payload), _environment(request)),
            self.hidden,
            shape=RECORDED,
        )
        if "error" in outcome:
            raise BackendError(outcome["error"], outcome["reason"])
        stdout = outcome["stdout"].encode("utf-8", "surrogateescape")  # the bytes it printed, as it printed them
        if not stdout.strip():
            raise BackendError("reply:not-json", "the command printed nothing")
        try:
            return parse_reply(json.loads(stdout), hidden=self.hidden)
        except (ValueError, RecursionError):
            err = BackendError("reply:not-json", f"the command's output is not JSON: {self.hidden.clip(stdout, 200)}")
            err.said = outcome["stdout"]  # what it printed is what it said: read for leaks, never written
            raise err from None

    def _ran(self, body: bytes, told: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The command run once on this stdin (and told, in its environment, the MCP endpoint serving its tools and
        the base URL of its model proxy, if any): what it printed, as text; or why it gave no reply."""
        try:
            return {"stdout": self._run_command(body, told).decode("utf-8", "surrogateescape")}
        except BackendError as err:
            return {"error": err.code, "reason": err.reason}

    def _run_command(self, body: bytes, told: Mapping[str, str] | None = None) -> bytes:
        """What the command printed on stdout; BackendError when it could not start, timed out, printed too much or
        failed, unless what it printed says what it did before it failed."""
        import subprocess  # only a run of this backend pays for these
        import tempfile

        with tempfile.TemporaryDirectory(prefix="eval-agent-") as folder:
            try:
                # A session of its own, so that a timeout can end the agent and everything it started.
                proc = subprocess.Popen(
                    self.argv,
                    cwd=folder,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    env={**(self._unserved_env or os.environ), **told} if told else self._unserved_env,
                )
            except OSError as exc:
                raise BackendError(
                    "reply:command-start", f"cannot start {self.argv[0]}: {exc.strerror or exc}"
                ) from None
            RUNNING.add(proc.pid)
            stderr: deque[bytes] = deque(maxlen=STDERR_LINES)
            stdout, too_large, ended = bytearray(), threading.Event(), threading.Event()
            pipes = [
                threading.Thread(
                    target=_read_capped,
                    args=(proc.stdout, ended, stdout, self.max_output_bytes, too_large, proc),
                    daemon=True,
                ),
                threading.Thread(target=_read_lines, args=(proc.stderr, ended, stderr), daemon=True),
                # Written beside the wait: a command busy before it reads a request larger than a pipe holds would
                # hold the writer, and the timeout with it.
                threading.Thread(target=_write_stdin, args=(proc, body), daemon=True),
            ]
            for pipe in pipes:
                pipe.start()
            try:
                code = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise BackendError(
                    "reply:timeout", f"no reply within {self.timeout:g}s; the command and its children were killed"
                ) from None
            finally:
                # Done, timed out or interrupted, what the command started ends with it: a child left holding its
                # stdout would hold the readers, and outlive the run. What the group wrote is then all waiting in the
                # pipes; a process that left the group (a daemon, in a session of its own) may write on, unread.
                _kill_group(proc)
                ended.set()
                RUNNING.discard(proc.pid)
                deadline = time.monotonic() + READ_GRACE
                for pipe in pipes:
                    pipe.join(timeout=max(0.0, deadline - time.monotonic()))
            if too_large.is_set():
                raise BackendError("reply:too-large", f"the command printed over {self.max_output_bytes} bytes")
            if code != 0 and partial_reply(bytes(stdout)) is not None:
                return bytes(stdout)  # what the agent did before it failed, its failure said in the reply's error
            if code != 0:
                last = self.hidden.clip(" | ".join(line.decode("utf-8", "replace").rstrip() for line in stderr), 200)
                raise BackendError("reply:command-exit", f"the command exited with {code}{': ' + last if last else ''}")
        return bytes(stdout)


def _environment(request: AgentRequest) -> dict[str, str] | None:
    """What a command is told in its environment besides the run's: where its tools are served, where its model is
    proxied."""
    if request.tool_server is None and request.model_proxy is None:
        return None
    told = {TOOL_SERVER_URL.var: request.tool_server[0]} if request.tool_server else {}
    return {**told, MODEL_BASE_URL: request.model_proxy} if request.model_proxy else told


def _write_stdin(proc: subprocess.Popen[bytes], body: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(body)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the agent did not read its input; its exit and output tell the rest


def _chunks(stream: IO[bytes] | None, ended: threading.Event) -> Iterator[bytes]:
    """What a pipe gives until its end, or, once the command's group has ended, until nothing more is waiting in it."""
    import select

    assert stream is not None
    waiting = select.poll()  # not select(), which takes no file descriptor past 1023: a wide run has more
    waiting.register(stream, select.POLLIN)
    with stream:
        while True:
            done = ended.is_set()  # looked at first: all the group wrote is in the pipe once it is set
            if not waiting.poll(0 if done else POLL * 1000):
                if done:
                    return
                continue
            chunk = os.read(stream.fileno(), READ_CHUNK)
            if not chunk:
                return
            yield chunk


def _read_capped(
    stream: IO[bytes] | None,
    ended: threading.Event,
    into: bytearray,
    limit: int,
    too_large: threading.Event,
    proc: subprocess.Popen[bytes],
) -> None:
    for chunk in _chunks(stream, ended):
        into += chunk
        if len(into) > limit:
            too_large.set()
            _signal_group(proc.pid)
            return


def _read_lines(stream: IO[bytes] | None, ended: threading.Event, into: deque[bytes]) -> None:
    """The last lines, each cut at STDERR_LINE_BYTES: the rest of a longer line is read past rather than held."""
    line = b""
    for chunk in _chunks(stream, ended):
        *lines, line = (line + chunk).split(b"\n")
        into.extend(whole[:STDERR_LINE_BYTES] + b"\n" for whole in lines)
        line = line[:STDERR_LINE_BYTES]
    if line:
        into.append(line)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's process group, the command too if it still runs, and reap the command."""
    # Its id is the command's, which no new process takes while the group has a process left in it.
    _signal_group(proc.pid)
    proc.wait()


def _signal_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left in it, or nothing in it the harness may end


def _end_all() -> None:
    """Kill the process groups of the commands still running: the run ends before they do."""
    for group in list(RUNNING):
        _signal_group(group)
