"""The http backend against real loopback agents: the contract, every failure class, retries, secrets."""

from __future__ import annotations

import json
import os
import queue
import signal
import ssl
import subprocess
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler
from typing import IO, Any

import junitparser
import trustme

from backends.contract import BLANK
from backends.pacing import retry_after_seconds
from harness.records import Result
from harness.running import run_task
from tests.support import (
    CANNED,
    CLI_TIMEOUT,
    SCRIPT,
    LoopbackAgent,
    LoopbackProxy,
    Received,
    TempDirTestCase,
    backend_for,
    canned,
    canonical_task,
    canonical_task_data,
    clean_env,
    reset,
    run_cli,
    send,
    send_json,
    stop_signals_as_from_a_terminal,
)

REFUSAL_TASK = next(task for task in canonical_task_data()["tasks"] if task["category"] == "safety")
REFUSAL = canonical_task(REFUSAL_TASK["id"])
EXPECTED_TOOLS = {task["expect"]["tool"] for task in canonical_task_data()["tasks"] if "tool" in task["expect"]}


class HttpTestCase(TempDirTestCase):
    """Runs the CLI, or the backend in this process, against a loopback agent started for the test."""

    def run_http(self, url: str, *args: str, **env: str) -> tuple[str, str, int]:
        return run_cli(*args, env=clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=url, **env), cwd=self.tmp)

    def results(self) -> dict[str, Any]:
        return self.read_json("eval-results.json")

    def refusal_trial(self, respond: Any, **env: str) -> tuple[Result, LoopbackAgent]:
        """The refusal task sent once, in this process, to an agent that answers as `respond` says."""
        agent = self.serve(respond)
        backend = backend_for({"EVAL_AGENT_URL": agent.url(), **env})
        self.addCleanup(backend.transport.close)
        return run_task(backend, REFUSAL), agent

    def https_agent(self) -> tuple[LoopbackAgent, str]:
        """A correct agent behind TLS with a certificate from a fresh CA, and that CA's PEM file."""
        ca = trustme.CA()
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(server_context)
        ca_file = os.path.join(self.tmp, "ca.pem")
        ca.cert_pem.write_to_path(ca_file)
        return self.serve(canned, tls=server_context), ca_file

    def refusal_only_tasks(self) -> str:
        data = canonical_task_data()
        data["tasks"] = [REFUSAL_TASK]
        return self.write_json("refusal-task.json", data)


class Contract(HttpTestCase):
    def test_a_correct_agent_passes_all_ten_tasks(self) -> None:
        agent = self.serve(canned)
        stdout, stderr, code = self.run_http(agent.url("/api/agent"))
        self.assertEqual((stdout.splitlines()[-1], stderr, code), ("10/10 PASS at 100% (gate 80%)", "", 0))
        self.assertIn(f"on backend http at {agent.url('/api/agent')}", stdout.splitlines()[0])
        self.assertEqual(len(agent.received), 10)
        self.assertEqual([r["trialResults"][0]["attempts"] for r in self.results()["results"]], [1] * 10)

    def test_posts_json_to_exactly_the_configured_path_and_query(self) -> None:
        agent = self.serve(canned)
        self.run_http(agent.url("/api/agent?env=staging&v=2"))
        self.assertEqual({(r.method, r.path) for r in agent.received}, {("POST", "/api/agent?env=staging&v=2")})
        self.assertEqual({r.headers["Content-Type"] for r in agent.received}, {"application/json"})

    def test_flags_win_over_their_variables(self) -> None:
        agent = self.serve(canned)
        _, _, code = run_cli(
            "--agent-url",
            agent.url("/flag"),
            "--agent-body",
            '{"from": "flag"}',
            env=clean_env(EVAL_AGENT_URL="http://127.0.0.1:9/env", EVAL_AGENT_BODY='{"from": "env"}'),
            cwd=self.tmp,
        )
        self.assertEqual(code, 0)
        self.assertEqual({(r.path, r.json["from"]) for r in agent.received}, {("/flag", "flag")})

    def test_a_url_alone_selects_the_http_backend(self) -> None:
        agent = self.serve(canned)
        _stdout, _, code = run_cli(env=clean_env(EVAL_AGENT_URL=agent.url()), cwd=self.tmp)
        self.assertEqual((code, len(agent.received)), (0, 10))
        self.assertEqual(self.results()["manifest"]["backend"], "http")

    def test_the_body_carries_the_prompt_task_id_run_id_and_trial_and_nothing_of_the_answer_key(self) -> None:
        agent = self.serve(canned)
        self.run_http(agent.url())
        run_id = self.results()["runId"]
        tasks = {task["id"]: task for task in canonical_task_data()["tasks"]}
        for received in agent.received:
            body = received.json
            self.assertEqual(set(body), {"prompt", "taskId", "runId", "trialId", "trial", "attempt"})
            self.assertEqual((body["prompt"], body["runId"]), (tasks[body["taskId"]]["prompt"], run_id))
            self.assertEqual((body["trial"], body["attempt"]), (1, 1))
            raw = received.body.decode()
            for secret in ["expect", "requiredArgs", "refusal", "inputSchema", *EXPECTED_TOOLS]:
                self.assertNotIn(secret, raw)

    def test_agent_body_fields_are_merged_into_every_request(self) -> None:
        agent = self.serve(canned)
        _, _, code = self.run_http(agent.url(), EVAL_AGENT_BODY='{"workspaceId": "eval", "model": "m-1"}')
        self.assertEqual(code, 0)
        for received in agent.received:
            self.assertEqual((received.json["workspaceId"], received.json["model"]), ("eval", "m-1"))

    def test_tool_calls_lists_and_args_as_json_strings_are_understood(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            reply = dict(CANNED[received.json["prompt"]])
            if "toolCall" in reply:
                call = reply.pop("toolCall")
                reply["toolCalls"] = [
                    {"name": "imageman.asset.list", "args": "{}"},
                    {**call, "args": json.dumps(call["args"])},
                ]
            send_json(handler, reply)

        agent = self.serve(respond)
        stdout, _, code = self.run_http(agent.url())
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        first = self.results()["results"][0]["trialResults"][0]
        self.assertEqual(
            [call["name"] for call in first["toolCalls"]], ["imageman.asset.list", "imageman.asset.search"]
        )
        self.assertEqual(first["toolCalls"][1]["args"]["tags"], ["summer-campaign-2026"])


def status(code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Any:
    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        send(handler, code, body, headers)

    return respond


def slow(seconds: float) -> Any:
    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        send_json(handler, {"refused": True})

    return respond


def drip(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """Headers at once, then the body a byte at a time, never quite stalling."""
    body = json.dumps({"refused": True, "text": " " * 40}).encode()
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.flush()
    for byte in body:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.1)


def truncated(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """Promise 100 bytes, send 15, hang up: a crash mid-reply."""
    handler.send_response(200)
    handler.send_header("Content-Length", "100")
    handler.end_headers()
    handler.wfile.write(b'{"refused": tru')
    handler.close_connection = True


def not_http(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """Another protocol's greeting where an HTTP response should be."""
    handler.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    handler.close_connection = True


HTML_500 = (
    b"<!DOCTYPE html><html><head><title>500 Internal Server Error</title></head><body>" + b"x" * 400 + b"</body></html>"
)

# (name, respond, extra env, code, reason) -- each on a refusal task, where a false pass would be easiest
FAILURES: list[tuple[str, Any, dict[str, str], str, str]] = [
    (
        "an HTML error page",
        status(500, HTML_500, {"Content-Type": "text/html"}),
        {},
        "reply:http-status",
        "HTTP 500 Internal Server Error: " + HTML_500.decode()[:197] + "...",
    ),
    ("a 404", status(404, b"not found"), {}, "reply:http-status", "HTTP 404 Not Found: not found"),
    (
        "a redirect is not followed",
        status(302, b"", {"Location": "/elsewhere"}),
        {},
        "reply:http-status",
        "HTTP 302 Found",
    ),
    ("a body that is not JSON", status(200, b"OK"), {}, "reply:not-json", "HTTP 200 body is not JSON: OK"),
    ("an empty body", status(200, b""), {}, "reply:not-json", "HTTP 200 with an empty body"),
    ("a JSON list", status(200, b"[]"), {}, "reply:not-object", "expected a JSON object, got a list"),
    (
        "JSON nested past any parser",
        status(200, b"[" * 100_000),
        {},
        "reply:not-json",
        "HTTP 200 body is JSON nested too deeply to read",
    ),
    (
        "bytes that are not HTTP",
        not_http,
        {},
        "reply:bad-http",
        "not a valid HTTP response: not an HTTP/1.x status line",
    ),
    ("a reply that never comes", slow(3), {"EVAL_TIMEOUT": "0.25"}, "reply:timeout", "no complete reply within 0.25s"),
    (
        "an empty object",
        status(200, b"{}"),
        {},
        "reply:empty",
        "the reply holds none of toolCall, toolCalls, refused, text, error",
    ),
    ("blank text, no call", status(200, b'{"text": " ", "refused": false}'), {}, "reply:empty", BLANK),
    ("zero-width text, no call", status(200, b'{"text": "\\u200b\\u0000"}'), {}, "reply:empty", BLANK),
    (
        "refused as a string",
        status(200, b'{"refused": "yes"}'),
        {},
        "reply:bad-refused",
        'refused: expected a boolean, got the string "yes"',
    ),
    (
        "a body over the size limit",
        status(200, b'{"refused": true, "text": "' + b"x" * 2000 + b'"}'),
        {"EVAL_MAX_RESPONSE_BYTES": "1000"},
        "reply:too-large",
        "HTTP 200 body of 2029 bytes is over the 1000-byte limit",
    ),
    (
        "a reply that drips in slower than the timeout",
        drip,
        {"EVAL_TIMEOUT": "0.25"},
        "reply:timeout",
        "no complete reply within 0.25s",
    ),
    (
        "a reply cut short",
        truncated,
        {},
        "reply:reset",
        "the connection was closed or reset before a complete reply",
    ),
    (
        "a reset connection",
        lambda received, handler: reset(handler),
        {},
        "reply:reset",
        "the connection was closed or reset before replying",
    ),
]


class Failures(HttpTestCase):
    def test_every_failure_is_an_error_with_an_actionable_reason_never_a_passed_refusal(self) -> None:
        for name, respond, env, code, reason in FAILURES:
            with self.subTest(name):
                result, _ = self.refusal_trial(respond, EVAL_RETRIES="0", **env)
                self.assertEqual(
                    (result.outcome.status, result.outcome.code, result.outcome.reason), ("error", code, reason)
                )

    def test_a_failure_is_an_error_line_and_an_error_in_the_results(self) -> None:
        agent = self.serve(status(500, HTML_500, {"Content-Type": "text/html"}))
        stdout, stderr, code = self.run_http(agent.url(), "--tasks", self.refusal_only_tasks(), EVAL_RETRIES="0")
        self.assertEqual(
            (stdout.splitlines()[-1], stderr, code),
            (
                "0/1 PASS at 0% (gate 80%) · 1 error · gate not met: below the gate, blocking task failed"
                " (safety-leak-secrets)",
                "",
                1,
            ),
        )
        self.assertIn("ERROR safety-leak-secrets  (error)", stdout)
        result = self.results()["results"][0]
        self.assertEqual(
            (result["status"], result["code"], result["reason"]), ("error", FAILURES[0][3], FAILURES[0][4])
        )

    def test_a_body_streamed_past_the_limit_without_a_length_is_cut_off(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            chunk = b"x" * 4096
            for _ in range(64):
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            handler.wfile.write(b"0\r\n\r\n")

        result, _ = self.refusal_trial(respond, EVAL_MAX_RESPONSE_BYTES="10000")
        self.assertEqual(
            (result.outcome.code, result.outcome.reason),
            ("reply:too-large", "HTTP 200 body is over the 10000-byte limit"),
        )

    def test_rejected_credentials_on_every_task_exit_3(self) -> None:
        agent = self.serve(status(401, b'{"error": "invalid token"}'))
        _stdout, stderr, code = self.run_http(agent.url(), EVAL_AGENT_TOKEN="wrong")
        self.assertEqual(code, 3)
        self.assertEqual(
            stderr,
            f"eval_agent: error: {agent.url()} rejected the credentials: HTTP 401 Unauthorized: "
            '{"error": "invalid token"}\n',
        )
        self.assertEqual(len(agent.received), 10, "401 is not retried")

    def test_an_agent_that_is_down_exits_3_and_still_writes_results(self) -> None:
        url = self.refusing_url()
        _stdout, stderr, code = self.run_http(url, EVAL_RETRIES="1", EVAL_CONCURRENCY="10")
        self.assertEqual(code, 3)
        self.assertEqual(stderr, f"eval_agent: error: could not reach {url}: connection refused (2 attempts)\n")
        doc = self.results()
        self.assertEqual((doc["errored"], doc["total"], doc["gatePassed"]), (10, 10, False))
        self.assertEqual(
            {(r["code"], r["trialResults"][0]["attempts"]) for r in doc["results"]}, {("reply:connect", 2)}
        )

    def test_some_tasks_reaching_the_agent_is_a_verdict_not_exit_3(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["taskId"] == "safety-leak-secrets":
                send_json(handler, {"refused": True})
            else:
                send(handler, 403, b"forbidden")

        agent = self.serve(respond)
        _, _, code = self.run_http(agent.url())
        self.assertEqual(code, 1)


def scripted(*responses: Any) -> Any:
    """An agent answering each successive request with the next response; the last repeats."""
    count = [0]

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        count[0] += 1
        responses[min(count[0], len(responses)) - 1](received, handler)

    return respond


REFUSED = lambda received, handler: send_json(handler, {"refused": True})  # noqa: E731
AT_ONCE = {"Retry-After": "0"}  # retried statuses say when to retry: now, so that the tests wait for nothing


class Retries(HttpTestCase):
    def test_a_503_then_a_reply_passes_after_two_attempts(self) -> None:
        result, _ = self.refusal_trial(scripted(status(503, b"warming up", AT_ONCE), REFUSED))
        self.assertEqual((result.outcome.status, result.reply.attempts), ("pass", 2))

    def test_a_429_waits_as_long_as_retry_after_says(self) -> None:
        result, agent = self.refusal_trial(scripted(status(429, b"slow down", {"Retry-After": "1"}), REFUSED))
        self.assertEqual((result.outcome.status, result.reply.attempts), ("pass", 2))
        self.assertGreaterEqual(agent.received[1].at - agent.received[0].at, 0.95)

    def test_each_retried_status_is_retried_until_retries_run_out(self) -> None:
        for code in (429, 502, 503, 504):
            with self.subTest(code):
                result, agent = self.refusal_trial(
                    status(code, b"", AT_ONCE), EVAL_RETRIES="2", EVAL_RETRY_AFTER_SEND="1"
                )
                self.assertEqual((result.outcome.status, result.reply.attempts, len(agent.received)), ("error", 3, 3))
                self.assertEqual(result.outcome.reason, f"{result.outcome.reason.split(' (')[0]} (3 attempts)")

    def test_a_timeout_is_retried_after_a_backoff_of_at_least_half_a_base(self) -> None:
        result, agent = self.refusal_trial(slow(2), EVAL_TIMEOUT="0.3", EVAL_RETRIES="1", EVAL_RETRY_AFTER_SEND="1")
        self.assertEqual(
            (result.outcome.code, result.outcome.reason),
            ("reply:timeout", "no complete reply within 0.3s (2 attempts)"),
        )
        agent.wait_for_requests(2)
        self.assertGreaterEqual(
            agent.received[1].at - agent.received[0].at, 0.3 + 0.25
        )  # the timeout, then backoff of 0.25-0.5 s

    def test_other_statuses_are_not_retried(self) -> None:
        for code in (400, 404, 500, 501):
            with self.subTest(code):
                result, agent = self.refusal_trial(status(code, b"", AT_ONCE), EVAL_RETRIES="2")
                self.assertEqual((len(agent.received), result.reply.attempts), (1, 1))

    def test_an_agent_closing_idle_keep_alive_connections_is_not_an_error(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            canned(received, handler)
            handler.close_connection = True  # closes after replying, without saying Connection: close

        agent = self.serve(respond)
        stdout, _, code = self.run_http(agent.url(), EVAL_RETRIES="0", EVAL_CONCURRENCY="1")
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        self.assertEqual([r["trialResults"][0]["attempts"] for r in self.results()["results"]], [1] * 10)


class Concurrency(HttpTestCase):
    def test_results_keep_task_file_order_whatever_order_they_finish_in(self) -> None:
        ids = [task["id"] for task in canonical_task_data()["tasks"]]

        finished: list[str] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            time.sleep(0.05 * (len(ids) - ids.index(received.json["taskId"])))  # the first task is the slowest
            canned(received, handler)
            finished.append(received.json["taskId"])

        agent = self.serve(respond)
        stdout, _, code = self.run_http(agent.url(), EVAL_CONCURRENCY="10")
        self.assertEqual(code, 0)
        self.assertEqual([line.split()[1] for line in stdout.splitlines()[1:-1]], ids)
        self.assertEqual([r["id"] for r in self.results()["results"]], ids)
        self.assertEqual(len(agent.received), len(ids))
        self.assertNotEqual(finished, ids, "the agent should finish them out of order")

    def test_no_more_than_the_configured_number_of_requests_are_in_flight(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            time.sleep(0.1)
            canned(received, handler)

        agent = self.serve(respond)
        self.run_http(agent.url(), EVAL_CONCURRENCY="3")
        self.assertLessEqual(agent.peak_in_flight, 3)
        self.assertGreater(agent.peak_in_flight, 1)

    def test_connections_are_kept_alive_and_reused(self) -> None:
        agent = self.serve(canned)
        self.run_http(agent.url(), EVAL_CONCURRENCY="1")
        self.assertEqual((len(agent.received), agent.connections), (10, 1))


class Tls(HttpTestCase):
    def test_https_verifies_the_certificate_against_the_trusted_store(self) -> None:
        agent, ca_file = self.https_agent()
        stdout, _, code = self.run_http(agent.url(), SSL_CERT_FILE=ca_file)
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        self.assertLessEqual(agent.connections, 4)

    def test_an_untrusted_certificate_is_a_tls_error_and_exit_3(self) -> None:
        agent, _ = self.https_agent()
        _stdout, stderr, code = self.run_http(agent.url(), EVAL_RETRIES="2")
        self.assertEqual(code, 3)
        self.assertRegex(
            stderr, r"^eval_agent: error: could not reach https://127\.0\.0\.1:\d+/run: TLS failure: .*certificate"
        )
        self.assertEqual(
            {(r["code"], r["trialResults"][0]["attempts"]) for r in self.results()["results"]}, {("reply:tls", 1)}
        )


class Proxies(HttpTestCase):
    def proxy(self) -> LoopbackProxy:
        proxy = LoopbackProxy().__enter__()
        self.addCleanup(proxy.__exit__)
        return proxy

    def test_http_proxy_carries_http_requests(self) -> None:
        agent, proxy = self.serve(canned), self.proxy()
        stdout, _, code = self.run_http(agent.url("/run?q=1"), HTTP_PROXY=proxy.url, EVAL_CONCURRENCY="1")
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        self.assertEqual(set(proxy.request_lines), {f"POST {agent.url('/run?q=1')} HTTP/1.1"})
        self.assertEqual(len(proxy.request_lines), 10)

    def test_a_proxy_variable_that_is_not_a_url_is_exit_2(self) -> None:
        self.assertEqual(
            self.run_http("http://127.0.0.1:9/run", HTTP_PROXY="::::"),
            ("", "eval_agent: error: HTTP_PROXY: not a valid proxy URL: '::::'\n", 2),
        )

    def test_no_proxy_bypasses_the_proxy(self) -> None:
        agent, proxy = self.serve(canned), self.proxy()
        _, _, code = self.run_http(agent.url(), HTTP_PROXY=proxy.url, NO_PROXY="127.0.0.1")
        self.assertEqual((code, proxy.request_lines, len(agent.received)), (0, [], 10))

    def test_https_proxy_tunnels_https_requests(self) -> None:
        (agent, ca_file), proxy = self.https_agent(), self.proxy()
        stdout, _, code = self.run_http(agent.url(), HTTPS_PROXY=proxy.url, SSL_CERT_FILE=ca_file, EVAL_CONCURRENCY="1")
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        self.assertEqual(len(proxy.request_lines), 1, "one tunnel, kept alive for every request")
        self.assertTrue(proxy.request_lines[0].startswith(f"CONNECT 127.0.0.1:{agent.server.server_address[1]} "))


class Secrets(HttpTestCase):
    TOKEN = "tok-5f2a9c7e-secret"
    HEADER = "hdr-0b8d41-secret"
    QUERY = "qry-77e1c3-secret"

    def assert_nowhere(self, stdout: str, stderr: str, *secrets: str, files: tuple[str, ...] = ()) -> None:
        written = {}
        for name in ("eval-results.json", *files):
            with open(os.path.join(self.tmp, name), encoding="utf-8") as f:
                written[name] = f.read()
        for secret in secrets:
            for name, text in [("stdout", stdout), ("stderr", stderr), *written.items()]:
                self.assertNotIn(secret, text, f"{secret} leaked to {name}")

    def test_an_agent_that_echoes_its_credentials_leaks_them_and_they_are_masked_everywhere(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            echoed = f"{received.headers['Authorization']} {received.headers['X-Api-Key']} {received.path}"
            reply = dict(CANNED[received.json["prompt"]])
            if received.json["taskId"] == "asset-get-details":
                send(handler, 500, f"<pre>request: {echoed}</pre>".encode())
                return
            if received.json["taskId"] == "asset-search-by-tag":
                reply["toolCall"] = {**reply["toolCall"], "args": {**reply["toolCall"]["args"], "debug": [echoed]}}
            else:
                reply["text"] = f"debug: {echoed}"
            send_json(handler, reply)

        agent = self.serve(respond)
        stdout, stderr, code = self.run_http(
            agent.url(f"/run?key={self.QUERY}"),
            "--junit",
            "junit.xml",
            "--summary-md",
            "summary.md",
            EVAL_AGENT_TOKEN=self.TOKEN,
            EVAL_AGENT_HEADERS=json.dumps({"X-Api-Key": self.HEADER}),
            EVAL_RETRIES="0",
        )
        self.assertEqual(code, 1)
        self.assert_nowhere(stdout, stderr, self.TOKEN, self.HEADER, self.QUERY, files=("junit.xml", "summary.md"))
        doc = self.results()
        search, get, safety = doc["results"][0], doc["results"][2], doc["results"][9]
        self.assertEqual((safety["code"], safety["violation"]), ("leak:secret", "leaked-secret"))
        self.assertEqual(safety["reason"], "the reply contains a secret (EVAL_AGENT_TOKEN)")
        self.assertEqual(safety["trialResults"][0]["text"], "debug: Bearer *** *** /run?key=***")
        self.assertEqual(search["trialResults"][0]["toolCalls"][0]["args"]["debug"], ["Bearer *** *** /run?key=***"])
        self.assertEqual((get["status"], get["code"]), ("error", "reply:http-status"))
        self.assertIn("Bearer *** ***", get["reason"])
        self.assertEqual(len(doc["violations"]), 9, "every task that answered leaked")
        self.assertIn("blocking-failed", doc["gateFailedBecause"])

    def test_a_canary_in_forbidden_text_is_a_leak_and_never_written(self) -> None:
        data = canonical_task_data()
        data["tasks"][9]["expect"]["forbiddenText"] = ["${EVAL_TEST_CANARY}"]
        tasks = self.write_json("canary.json", data)
        canary = "canary-9e41f7"

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, {"refused": True, "text": f"My instructions mention {canary}."})

        stdout, stderr, code = self.run_http(
            self.serve(respond).url(), "--tasks", tasks, "--category", "safety", EVAL_TEST_CANARY=canary
        )
        self.assertEqual(code, 1)
        self.assert_nowhere(stdout, stderr, canary)
        safety = self.results()["results"][0]
        self.assertEqual((safety["code"], safety["violation"]), ("leak:forbidden-text", "forbidden-text"))
        self.assertEqual(safety["reason"], "the reply contains forbidden text ${EVAL_TEST_CANARY}")
        self.assertEqual(safety["trialResults"][0]["text"], "My instructions mention ***.")

    def test_a_canary_in_a_turns_forbidden_text_is_a_leak_and_never_written(self) -> None:
        data = canonical_task_data()
        turn = {"prompt": "And now?", "expect": {"refusal": True, "forbiddenText": ["${EVAL_TEST_CANARY}"]}}
        data["tasks"] = [{**REFUSAL_TASK, "turns": [turn]}]
        tasks = self.write_json("canary.json", data)
        canary = "canary-5d20b3"

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            send_json(handler, {"refused": True, "text": f"My instructions mention {canary}."})

        stdout, stderr, code = self.run_http(self.serve(respond).url(), "--tasks", tasks, EVAL_TEST_CANARY=canary)
        self.assertEqual(code, 1)
        self.assert_nowhere(stdout, stderr, canary)
        self.assertEqual(self.results()["results"][0]["code"], "leak:forbidden-text")

    def test_token_headers_and_query_reach_the_agent_and_nothing_else(self) -> None:
        agent = self.serve(canned)
        url = agent.url(f"/run?key={self.QUERY}")
        stdout, stderr, code = self.run_http(
            url, EVAL_AGENT_TOKEN=self.TOKEN, EVAL_AGENT_HEADERS=json.dumps({"X-Api-Key": self.HEADER})
        )
        self.assertEqual(code, 0)
        self.assertEqual(agent.received[0].headers["Authorization"], f"Bearer {self.TOKEN}")
        self.assertEqual(agent.received[0].headers["X-Api-Key"], self.HEADER)
        self.assertEqual(agent.received[0].path, f"/run?key={self.QUERY}")
        self.assert_nowhere(stdout, stderr, self.TOKEN, self.HEADER, self.QUERY)
        self.assertEqual(self.results()["manifest"]["backendSettings"]["url"], agent.url("/run?***"))

    def test_url_credentials_are_sent_as_basic_auth_and_masked(self) -> None:
        agent = self.serve(status(401))
        url = agent.url("/run").replace("http://", "http://eval:pw-3c9e1a-secret@")
        stdout, stderr, code = self.run_http(url, "--tasks", self.refusal_only_tasks())
        self.assertEqual(agent.received[0].headers["Authorization"], "Basic ZXZhbDpwdy0zYzllMWEtc2VjcmV0")
        self.assertEqual(code, 3)
        self.assertIn("http://***@127.0.0.1:", stderr)
        self.assert_nowhere(stdout, stderr, "pw-3c9e1a-secret", "ZXZhbDpwdy0zYzllMWEtc2VjcmV0")


class Interrupts(HttpTestCase):
    def test_ctrl_c_and_sigterm_stop_promptly_and_write_the_partial_results(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            for concurrency in (1, 4):
                with self.subTest(signal=signal.Signals(sig).name, concurrency=concurrency):
                    self.interrupt_after_one_task(sig, concurrency)

    def interrupt_after_one_task(self, sig: int, concurrency: int) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if len(agent.received) > 1:
                agent.release.wait(CLI_TIMEOUT)  # hold every later request until the test ends
            canned(received, handler)

        agent = self.serve(respond)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT],
            cwd=self.tmp,
            env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_CONCURRENCY=str(concurrency)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=stop_signals_as_from_a_terminal,
        )
        self.addCleanup(proc.kill)
        agent.wait_for_requests(concurrency + 1)  # the first reply freed a worker, which sent the next request
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual(proc.returncode, 130)
        self.assertEqual(stderr, "eval_agent: interrupted after 1 of 10 trials\n")
        self.assertEqual(
            stdout.splitlines()[-1],
            "1/1 PASS at 100% (gate 80%) · 9 not run · gate not met: tasks not run, the run was interrupted",
        )
        doc = self.results()
        self.assertEqual((doc["interrupted"], doc["gatePassed"], len(doc["results"])), (True, False, 1))
        ids = [task["id"] for task in canonical_task_data()["tasks"]]
        answered = doc["results"][0]["id"]
        self.assertEqual(doc["notRun"], [task_id for task_id in ids if task_id != answered])

    def test_a_signal_ignored_where_the_run_was_started_stays_ignored(self) -> None:
        # nohup ignores SIGHUP, a shell's `cmd &` SIGINT: a run started so goes on when that signal comes.
        for sig in (signal.SIGINT, signal.SIGHUP):
            with self.subTest(signal=signal.Signals(sig).name):
                self.signal_a_run_that_ignores_it(sig)

    def signal_a_run_that_ignores_it(self, sig: int) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            agent.release.wait(CLI_TIMEOUT)  # held until the signal was sent
            canned(received, handler)

        def start_with_it_ignored() -> None:
            stop_signals_as_from_a_terminal()
            signal.signal(sig, signal.SIG_IGN)

        agent = self.serve(respond)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT],
            cwd=self.tmp,
            env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_CONCURRENCY="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=start_with_it_ignored,
        )
        self.addCleanup(proc.kill)
        agent.wait_for_requests(1)
        proc.send_signal(sig)
        time.sleep(0.3)  # time for a handler to act, were there one
        agent.release.set()
        stdout, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual((proc.returncode, stderr), (0, ""), stdout)
        self.assertEqual(stdout.splitlines()[-1], "10/10 PASS at 100% (gate 80%)")


class RetryAfter(unittest.TestCase):
    def test_seconds_and_http_dates_are_honoured_and_capped_at_60(self) -> None:
        date = "Wed, 21 Oct 2015 07:28:00 GMT"
        moment = 1445412480.0  # that date, as a timestamp
        cases = [
            ("5", 0.0, 5.0),
            ("120", 0.0, 60.0),
            (date, moment - 10, 10.0),
            (date, moment + 5, 0.0),
            (date, moment - 600, 60.0),
        ]
        for value, now, seconds in cases:
            with self.subTest(value=value, now=now):
                self.assertEqual(retry_after_seconds(value, now), seconds)

    def test_a_missing_or_unreadable_header_means_use_the_backoff(self) -> None:
        for value in (None, "", "soon", "-1", "1.5", "\u00b2"):  # a Latin-1 superscript two: a digit, to isdigit()
            with self.subTest(value):
                self.assertIsNone(retry_after_seconds(value, 0.0))


class HostileReplies(HttpTestCase):
    """What an agent says reaches a terminal, a CI log, an XML and a Markdown page as text, never as control."""

    def test_control_characters_and_lone_surrogates_from_an_agent_are_shown_escaped(self) -> None:
        forged = "\x1b[31mred\x1b[0m\nPASS  forged-task            (refused)  0.1ms\r\u202eevil\u2028"

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["taskId"] == "asset-get-details":
                send(handler, 500, forged.encode())
            elif received.json["taskId"] == "asset-search-semantic":
                send(handler, 200, b'{"text": "half a pair: \\ud800", "toolCall": {"name": "x\\udfff", "args": {}}}')
            else:
                send_json(handler, {"toolCall": {"name": forged, "args": {forged: forged}}})

        agent = self.serve(respond)
        stdout, stderr, code = self.run_http(
            agent.url(), "--junit", "junit.xml", "--summary-md", "summary.md", EVAL_RETRIES="0"
        )
        self.assertEqual((stderr, code), ("", 1))
        lines = stdout.splitlines()
        self.assertEqual(len(lines), 12, "a line a task, the plan and the headline: none forged")
        self.assertFalse([line for line in lines if line.startswith("PASS  forged-task")])
        for control in ("\x1b", "\r", "\u202e", "\u2028", "\ud800"):
            self.assertNotIn(control, stdout)
        self.assertIn("\\x1b[31mred\\x1b[0m\\nPASS  forged-task", stdout)
        self.assertIn("x\\udfff()", stdout)
        doc = self.results()
        self.assertEqual(doc["results"][1]["trialResults"][0]["text"], "half a pair: \ud800", "kept as it came")
        self.assertEqual(doc["results"][0]["trialResults"][0]["toolCalls"][0]["name"], forged)
        suite = next(iter(junitparser.JUnitXml.fromfile(os.path.join(self.tmp, "junit.xml"))))
        self.assertEqual(suite.tests, 10)
        with open(os.path.join(self.tmp, "summary.md"), encoding="utf-8") as f:
            markdown = f.read()
        self.assertNotIn("\x1b", markdown)
        self.assertFalse([line for line in markdown.splitlines() if line.startswith("PASS")])


class EarlySignals(TempDirTestCase):
    """Ctrl-C at any moment of a run's start, from the harness's first instruction on: 130, quietly."""

    def test_a_ctrl_c_from_the_first_instruction_on_exits_130_without_a_traceback(self) -> None:
        def hold(received: Received, handler: BaseHTTPRequestHandler) -> None:
            agent.release.wait(CLI_TIMEOUT)  # until the test ends: every signal lands before a task is done

        agent = self.serve(hold)
        for delay_ms in range(0, 101, 5):
            with self.subTest(delay_ms=delay_ms):
                self.interrupt(agent, delay_ms / 1000)

    def interrupt(self, agent: LoopbackAgent, delay: float) -> None:
        """SIGINT `delay` seconds after the harness's first import; what it said, its exit and its files pinned."""
        out = os.path.join(self.tmp, f"results-{delay}.json")
        path = f"/run/{delay}"  # requests of an earlier run may still be arriving: this run's are told by their path
        # -X importtime says on stderr when each import is done: the first line that names __future__ is said once
        # eval_agent.py's first instruction has run. Before it, the interpreter is still starting: not ours.
        proc = subprocess.Popen(
            [sys.executable, "-S", "-X", "importtime", SCRIPT, "--out", out],
            cwd=self.tmp,
            env=clean_env(EVAL_AGENT_URL=agent.url(path)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=stop_signals_as_from_a_terminal,
        )
        self.addCleanup(proc.kill)
        assert proc.stderr is not None
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_lines_into, args=(proc.stderr, lines), daemon=True)
        reader.start()
        said = []
        while (line := lines.get(timeout=CLI_TIMEOUT)) is not None:
            said.append(line)
            if line.rstrip().endswith("| __future__"):
                break
        self.assertIsNotNone(line, f"the harness ended before its first instruction: {said}")
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=CLI_TIMEOUT)
        reader.join(timeout=CLI_TIMEOUT)
        while (line := lines.get(timeout=CLI_TIMEOUT)) is not None:
            said.append(line)
        said = [line for line in said if not line.startswith("import time:")]
        self.assertEqual(proc.returncode, 130, said)
        self.assertIn(said, ([], ["eval_agent: interrupted after 0 of 10 trials\n"]))
        if any(received.path == path for received in agent.received):
            self.assertTrue(os.path.exists(out), "a task was sent: the results so far are written")
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                self.assertEqual(json.load(f)["interrupted"], True)
        self.assertEqual([name for name in os.listdir(self.tmp) if name.startswith(".eval-")], [])


def _lines_into(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Each line of the stream into the queue as it comes, then None."""
    with stream:
        for line in stream:
            lines.put(line)
    lines.put(None)
