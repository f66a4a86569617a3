"""The http backend against real loopback agents: the contract, every failure class, retries, secrets."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import unittest
from http.server import BaseHTTPRequestHandler
from typing import Any

import trustme

from backends.transport import retry_after_seconds
from tests.agents import CANNED, LoopbackAgent, LoopbackProxy, Received, canned, reset, send, send_json
from tests.support import CLI_TIMEOUT, SCRIPT, TempDirTestCase, canonical_task_data, clean_env, run_cli

REFUSAL_TASK = next(task for task in canonical_task_data()["tasks"] if task["category"] == "safety")
EXPECTED_TOOLS = {task["expect"]["tool"] for task in canonical_task_data()["tasks"] if "tool" in task["expect"]}


class HttpTestCase(TempDirTestCase):
    """Runs the CLI against a loopback agent started for the test."""

    def agent(self, respond: Any, tls: Any = None) -> LoopbackAgent:
        agent = LoopbackAgent(respond, tls).__enter__()
        self.addCleanup(agent.__exit__)
        return agent

    def run_http(self, url: str, *args: str, **env: str) -> tuple[str, str, int]:
        return run_cli(*args, env=clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=url, **env), cwd=self.tmp)

    def results(self) -> dict[str, Any]:
        return self.read_json("eval-results.json")

    def https_agent(self) -> tuple[LoopbackAgent, str]:
        """A correct agent behind TLS with a certificate from a fresh CA, and that CA's PEM file."""
        ca = trustme.CA()
        server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(server_context)
        ca_file = os.path.join(self.tmp, "ca.pem")
        ca.cert_pem.write_to_path(ca_file)
        return self.agent(canned, tls=server_context), ca_file

    def refusal_only_tasks(self) -> str:
        data = canonical_task_data()
        data["tasks"] = [REFUSAL_TASK]
        return self.write_json("refusal-task.json", data)


class Contract(HttpTestCase):
    def test_a_correct_agent_passes_all_ten_tasks(self) -> None:
        agent = self.agent(canned)
        stdout, stderr, code = self.run_http(agent.url("/api/agent"))
        self.assertEqual((stdout.splitlines()[-1], stderr, code), ("10/10 PASS at 100% (gate 80%)", "", 0))
        self.assertIn(f"on backend http at {agent.url('/api/agent')}", stdout.splitlines()[0])
        self.assertEqual(len(agent.received), 10)
        self.assertEqual([r["trialResults"][0]["attempts"] for r in self.results()["results"]], [1] * 10)

    def test_posts_json_to_exactly_the_configured_path_and_query(self) -> None:
        agent = self.agent(canned)
        self.run_http(agent.url("/api/agent?env=staging&v=2"))
        self.assertEqual({(r.method, r.path) for r in agent.received}, {("POST", "/api/agent?env=staging&v=2")})
        self.assertEqual({r.headers["Content-Type"] for r in agent.received}, {"application/json"})

    def test_flags_win_over_their_variables(self) -> None:
        agent = self.agent(canned)
        _, _, code = run_cli(
            "--agent-url", agent.url("/flag"), "--agent-body", '{"from": "flag"}',
            env=clean_env(EVAL_AGENT_URL="http://127.0.0.1:9/env", EVAL_AGENT_BODY='{"from": "env"}'),
            cwd=self.tmp,
        )
        self.assertEqual(code, 0)
        self.assertEqual({(r.path, r.json["from"]) for r in agent.received}, {("/flag", "flag")})

    def test_a_url_alone_selects_the_http_backend(self) -> None:
        agent = self.agent(canned)
        stdout, _, code = run_cli(env=clean_env(EVAL_AGENT_URL=agent.url()), cwd=self.tmp)
        self.assertEqual((code, len(agent.received)), (0, 10))
        self.assertEqual(self.results()["manifest"]["backend"], "http")

    def test_the_body_carries_the_prompt_task_id_and_run_id_and_nothing_of_the_answer_key(self) -> None:
        agent = self.agent(canned)
        self.run_http(agent.url())
        run_id = self.results()["runId"]
        tasks = {task["id"]: task for task in canonical_task_data()["tasks"]}
        for received in agent.received:
            body = received.json
            self.assertEqual(set(body), {"prompt", "taskId", "runId"})
            self.assertEqual((body["prompt"], body["runId"]), (tasks[body["taskId"]]["prompt"], run_id))
            raw = received.body.decode()
            for secret in ["expect", "requiredArgs", "refusal", "inputSchema", *EXPECTED_TOOLS]:
                self.assertNotIn(secret, raw)

    def test_agent_body_fields_are_merged_into_every_request(self) -> None:
        agent = self.agent(canned)
        _, _, code = self.run_http(agent.url(), EVAL_AGENT_BODY='{"workspaceId": "eval", "model": "m-1"}')
        self.assertEqual(code, 0)
        for received in agent.received:
            self.assertEqual((received.json["workspaceId"], received.json["model"]), ("eval", "m-1"))

    def test_tool_calls_lists_and_args_as_json_strings_are_understood(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            reply = dict(CANNED[received.json["prompt"]])
            if "toolCall" in reply:
                call = reply.pop("toolCall")
                reply["toolCalls"] = [{"name": "imageman.asset.list", "args": "{}"}, {**call, "args": json.dumps(call["args"])}]
            send_json(handler, reply)

        agent = self.agent(respond)
        stdout, _, code = self.run_http(agent.url())
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        first = self.results()["results"][0]["trialResults"][0]
        self.assertEqual([call["name"] for call in first["toolCalls"]], ["imageman.asset.list", "imageman.asset.search"])
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


HTML_500 = b"<!DOCTYPE html><html><head><title>500 Internal Server Error</title></head><body>" + b"x" * 400 + b"</body></html>"

# (name, respond, extra env, code, reason) -- each on a refusal task, where a false pass would be easiest
FAILURES: list[tuple[str, Any, dict[str, str], str, str]] = [
    (
        "an HTML error page",
        status(500, HTML_500, {"Content-Type": "text/html"}),
        {},
        "reply:http-status",
        "HTTP 500 Internal Server Error: " + HTML_500.decode()[:200],
    ),
    ("a 404", status(404, b"not found"), {}, "reply:http-status", "HTTP 404 Not Found: not found"),
    ("a redirect is not followed", status(302, b"", {"Location": "/elsewhere"}), {}, "reply:http-status", "HTTP 302 Found"),
    ("a body that is not JSON", status(200, b"OK"), {}, "reply:not-json", "HTTP 200 body is not JSON: OK"),
    ("an empty body", status(200, b""), {}, "reply:not-json", "HTTP 200 with an empty body"),
    ("a JSON list", status(200, b"[]"), {}, "reply:not-object", "expected a JSON object, got a list"),
    ("JSON nested past any parser", status(200, b"[" * 100_000), {}, "reply:not-json", "HTTP 200 body is JSON nested too deeply to read"),
    ("bytes that are not HTTP", not_http, {}, "reply:bad-http", "not a valid HTTP response: not an HTTP/1.x status line"),
    ("a reply that never comes", slow(3), {"EVAL_TIMEOUT": "0.5"}, "reply:timeout", "no complete reply within 0.5s"),
    ("an empty object", status(200, b"{}"), {}, "reply:empty", "the reply holds none of toolCall, toolCalls, refused, text"),
    ("refused as a string", status(200, b'{"refused": "yes"}'), {}, "reply:bad-refused", 'refused: expected a boolean, got the string "yes"'),
    (
        "a body over the size limit",
        status(200, b'{"refused": true, "text": "' + b"x" * 2000 + b'"}'),
        {"EVAL_MAX_RESPONSE_BYTES": "1000"},
        "reply:too-large",
        "HTTP 200 body of 2029 bytes is over the 1000-byte limit",
    ),
    ("a reply that drips in slower than the timeout", drip, {"EVAL_TIMEOUT": "0.5"}, "reply:timeout", "no complete reply within 0.5s"),
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
        tasks = self.refusal_only_tasks()
        for name, respond, env, code, reason in FAILURES:
            with self.subTest(name):
                agent = self.agent(respond)
                stdout, stderr, exit_code = self.run_http(agent.url(), "--tasks", tasks, EVAL_RETRIES="0", **env)
                self.assertEqual((stdout.splitlines()[-1], exit_code), ("0/1 PASS at 0% (gate 80%) · 1 error · blocking task failed: safety-leak-secrets · gate not met", 1))
                result = self.results()["results"][0]
                self.assertEqual((result["status"], result["code"], result["reason"]), ("error", code, reason))
                self.assertIn("ERROR safety-leak-secrets  (error)", stdout)

    def test_a_body_streamed_past_the_limit_without_a_length_is_cut_off(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(200)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            chunk = b"x" * 4096
            for _ in range(64):
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            handler.wfile.write(b"0\r\n\r\n")

        agent = self.agent(respond)
        self.run_http(agent.url(), "--tasks", self.refusal_only_tasks(), EVAL_MAX_RESPONSE_BYTES="10000")
        result = self.results()["results"][0]
        self.assertEqual((result["code"], result["reason"]), ("reply:too-large", "HTTP 200 body is over the 10000-byte limit"))

    def test_rejected_credentials_on_every_task_exit_3(self) -> None:
        agent = self.agent(status(401, b'{"error": "invalid token"}'))
        stdout, stderr, code = self.run_http(agent.url(), EVAL_AGENT_TOKEN="wrong")
        self.assertEqual(code, 3)
        self.assertEqual(
            stderr,
            f"eval_agent: error: {agent.url()} rejected the credentials: HTTP 401 Unauthorized: "
            '{"error": "invalid token"}\n',
        )
        self.assertEqual(len(agent.received), 10, "401 is not retried")

    def test_an_agent_that_is_down_exits_3_and_still_writes_results(self) -> None:
        agent = LoopbackAgent(canned)
        url = agent.url()
        agent.server.server_close()  # the port is now closed: connection refused
        stdout, stderr, code = self.run_http(url, EVAL_RETRIES="1")
        self.assertEqual(code, 3)
        self.assertEqual(stderr, f"eval_agent: error: could not reach {url}: connection refused (2 attempts)\n")
        doc = self.results()
        self.assertEqual((doc["errored"], doc["total"], doc["gatePassed"]), (10, 10, False))
        self.assertEqual({(r["code"], r["trialResults"][0]["attempts"]) for r in doc["results"]}, {("reply:connect", 2)})

    def test_some_tasks_reaching_the_agent_is_a_verdict_not_exit_3(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["taskId"] == "safety-leak-secrets":
                send_json(handler, {"refused": True})
            else:
                send(handler, 403, b"forbidden")

        agent = self.agent(respond)
        _, _, code = self.run_http(agent.url())
        self.assertEqual(code, 1)


class Retries(HttpTestCase):
    def scripted(self, *responses: Any) -> LoopbackAgent:
        """An agent answering each successive request with the next response; the last repeats."""

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            index = min(len(agent.received), len(responses)) - 1
            responses[index](received, handler)

        agent = self.agent(respond)
        return agent

    def test_a_503_then_a_reply_passes_after_two_attempts(self) -> None:
        agent = self.scripted(status(503, b"warming up"), lambda received, handler: send_json(handler, {"refused": True}))
        stdout, _, code = self.run_http(agent.url(), "--tasks", self.refusal_only_tasks())
        self.assertEqual((stdout.splitlines()[-1], code), ("1/1 PASS at 100% (gate 80%)", 0))
        self.assertEqual(self.results()["results"][0]["trialResults"][0]["attempts"], 2)

    def test_a_429_waits_as_long_as_retry_after_says(self) -> None:
        agent = self.scripted(status(429, b"slow down", {"Retry-After": "1"}), lambda r, h: send_json(h, {"refused": True}))
        _, _, code = self.run_http(agent.url(), "--tasks", self.refusal_only_tasks())
        self.assertEqual(code, 0)
        self.assertGreaterEqual(agent.received[1].at - agent.received[0].at, 0.95)

    def test_each_retried_status_and_a_timeout_are_retried_until_retries_run_out(self) -> None:
        for respond, env in [(status(502), {}), (status(504), {}), (status(503), {}), (slow(2), {"EVAL_TIMEOUT": "0.3"})]:
            agent = self.agent(respond)
            self.run_http(agent.url(), "--tasks", self.refusal_only_tasks(), EVAL_RETRIES="2", **env)
            result = self.results()["results"][0]
            with self.subTest(result["reason"]):
                self.assertEqual((result["status"], result["trialResults"][0]["attempts"]), ("error", 3))
                self.assertTrue(result["reason"].endswith(" (3 attempts)"), result["reason"])
                agent.wait_for_requests(3)

    def test_other_statuses_are_not_retried(self) -> None:
        for code in (400, 404, 500, 501):
            with self.subTest(code):
                agent = self.agent(status(code))
                self.run_http(agent.url(), "--tasks", self.refusal_only_tasks(), EVAL_RETRIES="2")
                self.assertEqual((len(agent.received), self.results()["results"][0]["trialResults"][0]["attempts"]), (1, 1))

    def test_an_agent_closing_idle_keep_alive_connections_is_not_an_error(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            canned(received, handler)
            handler.close_connection = True  # closes after replying, without saying Connection: close

        agent = self.agent(respond)
        stdout, _, code = self.run_http(agent.url(), EVAL_RETRIES="0", EVAL_CONCURRENCY="1")
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        self.assertEqual([r["trialResults"][0]["attempts"] for r in self.results()["results"]], [1] * 10)


class Concurrency(HttpTestCase):
    def test_results_keep_task_file_order_whatever_order_they_finish_in(self) -> None:
        ids = [task["id"] for task in canonical_task_data()["tasks"]]

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            time.sleep(0.05 * (len(ids) - ids.index(received.json["taskId"])))  # the first task is the slowest
            canned(received, handler)

        agent = self.agent(respond)
        stdout, _, code = self.run_http(agent.url(), EVAL_CONCURRENCY="10")
        self.assertEqual(code, 0)
        self.assertEqual([line.split()[1] for line in stdout.splitlines()[1:-1]], ids)
        self.assertEqual([r["id"] for r in self.results()["results"]], ids)
        self.assertNotEqual([r.json["taskId"] for r in agent.received], ids, "the agent should see them out of order")

    def test_no_more_than_the_configured_number_of_requests_are_in_flight(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            time.sleep(0.2)
            canned(received, handler)

        agent = self.agent(respond)
        self.run_http(agent.url(), EVAL_CONCURRENCY="3")
        self.assertLessEqual(agent.peak_in_flight, 3)
        self.assertGreater(agent.peak_in_flight, 1)

    def test_connections_are_kept_alive_and_reused(self) -> None:
        agent = self.agent(canned)
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
        stdout, stderr, code = self.run_http(agent.url(), EVAL_RETRIES="2")
        self.assertEqual(code, 3)
        self.assertRegex(stderr, r"^eval_agent: error: could not reach https://127\.0\.0\.1:\d+/run: TLS failure: .*certificate")
        self.assertEqual({(r["code"], r["trialResults"][0]["attempts"]) for r in self.results()["results"]}, {("reply:tls", 1)})


class Proxies(HttpTestCase):
    def proxy(self) -> LoopbackProxy:
        proxy = LoopbackProxy().__enter__()
        self.addCleanup(proxy.__exit__)
        return proxy

    def test_http_proxy_carries_http_requests(self) -> None:
        agent, proxy = self.agent(canned), self.proxy()
        stdout, _, code = self.run_http(agent.url("/run?q=1"), HTTP_PROXY=proxy.url, EVAL_CONCURRENCY="1")
        self.assertEqual((stdout.splitlines()[-1], code), ("10/10 PASS at 100% (gate 80%)", 0))
        self.assertEqual(set(proxy.request_lines), {f"POST {agent.url('/run?q=1')} HTTP/1.1"})
        self.assertEqual(len(proxy.request_lines), 10)

    def test_no_proxy_bypasses_the_proxy(self) -> None:
        agent, proxy = self.agent(canned), self.proxy()
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

    def assert_nowhere(self, stdout: str, stderr: str, *secrets: str) -> None:
        with open(os.path.join(self.tmp, "eval-results.json"), encoding="utf-8") as f:
            written = f.read()
        for secret in secrets:
            for name, text in [("stdout", stdout), ("stderr", stderr), ("results file", written)]:
                self.assertNotIn(secret, text, f"{secret} leaked to {name}")

    def test_token_headers_and_query_reach_the_agent_and_nothing_else(self) -> None:
        agent = self.agent(canned)
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
        agent = self.agent(status(401))
        url = agent.url("/run").replace("http://", "http://eval:pw-3c9e1a-secret@")
        stdout, stderr, code = self.run_http(url, "--tasks", self.refusal_only_tasks())
        self.assertEqual(agent.received[0].headers["Authorization"], "Basic ZXZhbDpwdy0zYzllMWEtc2VjcmV0")
        self.assertEqual(code, 3)
        self.assertIn("http://***@127.0.0.1:", stderr)
        self.assert_nowhere(stdout, stderr, "pw-3c9e1a-secret", "ZXZhbDpwdy0zYzllMWEtc2VjcmV0")

    def test_a_bad_headers_variable_is_named_without_echoing_its_value(self) -> None:
        for value, message in [
            ("{not json " + self.HEADER, "EVAL_AGENT_HEADERS: expected a JSON object of header names to strings, got invalid JSON"),
            (json.dumps({"X-Key": ["a", self.HEADER]}), "EVAL_AGENT_HEADERS: the value of X-Key must be one line of printable Latin-1 text"),
            (json.dumps({"Content-Type": self.HEADER}), "EVAL_AGENT_HEADERS: Content-Type is set by the harness and cannot be overridden"),
        ]:
            with self.subTest(message):
                stdout, stderr, code = self.run_http("http://127.0.0.1:9/run", EVAL_AGENT_HEADERS=value)
                self.assertEqual((stdout, stderr, code), ("", f"eval_agent: error: {message}\n", 2))


class HttpConfigErrors(HttpTestCase):
    def test_each_bad_setting_is_one_line_naming_it(self) -> None:
        cases = [
            ({"EVAL_AGENT_URL": ""}, "EVAL_AGENT_URL: required by the http backend (or give --agent-url)"),
            ({"EVAL_AGENT_URL": "ftp://host/run"}, "EVAL_AGENT_URL: expected an http:// or https:// URL with a host, got 'ftp://host/run'"),
            ({"EVAL_AGENT_URL": "localhost:3000/run"}, "EVAL_AGENT_URL: expected an http:// or https:// URL with a host, got 'localhost:3000/run'"),
            ({"EVAL_TIMEOUT": "0"}, "EVAL_TIMEOUT: expected a number from 0.001 to 3600.0, got '0'"),
            ({"EVAL_RETRIES": "two"}, "EVAL_RETRIES: expected a whole number from 0 to 10, got 'two'"),
            ({"EVAL_CONCURRENCY": "0"}, "EVAL_CONCURRENCY: expected a whole number from 1 to 256, got '0'"),
            ({"EVAL_MAX_RESPONSE_BYTES": "10MB"}, "EVAL_MAX_RESPONSE_BYTES: expected a whole number from 1 to 1099511627776, got '10MB'"),
            ({"EVAL_AGENT_BODY": '{"prompt": "hi"}'}, "EVAL_AGENT_BODY: cannot set 'prompt'; the harness sends it"),
            ({"EVAL_AGENT_BODY": "[1]"}, "EVAL_AGENT_BODY: expected a JSON object"),
            ({"EVAL_AGENT_TOKEN": "abc\r\nX-Injected: 1"}, "EVAL_AGENT_TOKEN: must be one line of printable Latin-1 text"),
            (
                {"EVAL_AGENT_TOKEN": "t", "EVAL_AGENT_HEADERS": '{"Authorization": "Basic x"}'},
                "EVAL_AGENT_TOKEN: set, and EVAL_AGENT_URL or EVAL_AGENT_HEADERS carries credentials too; give one",
            ),
        ]
        for env, message in cases:
            with self.subTest(message):
                stdout, stderr, code = run_cli(
                    env=clean_env(**{"EVAL_BACKEND": "http", "EVAL_AGENT_URL": "http://127.0.0.1:9/run", **env}), cwd=self.tmp
                )
                self.assertEqual((stdout, stderr, code), ("", f"eval_agent: error: {message}\n", 2))


class Interrupts(HttpTestCase):
    def test_ctrl_c_and_sigterm_stop_promptly_and_write_the_partial_results(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            for concurrency in (1, 4):
                with self.subTest(signal=signal.Signals(sig).name, concurrency=concurrency):
                    self.interrupt_after_one_task(sig, concurrency)

    def interrupt_after_one_task(self, sig: int, concurrency: int) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if len(agent.received) > 1:
                agent.release.wait(CLI_TIMEOUT)  # hold every later request until the test ends
            canned(received, handler)

        agent = self.agent(respond)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT],
            cwd=self.tmp,
            env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_CONCURRENCY=str(concurrency)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.addCleanup(proc.kill)
        agent.wait_for_requests(concurrency + 1)  # the first reply freed a worker, which sent the next request
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual(proc.returncode, 130)
        self.assertEqual(stderr, "eval_agent: interrupted after 1 of 10 trials\n")
        self.assertEqual(stdout.splitlines()[-1], "1/1 PASS at 100% (gate 80%) · 9 not run · gate not met")
        doc = self.results()
        self.assertEqual((doc["interrupted"], doc["gatePassed"], len(doc["results"])), (True, False, 1))
        ids = [task["id"] for task in canonical_task_data()["tasks"]]
        answered = doc["results"][0]["id"]
        self.assertEqual(doc["notRun"], [task_id for task_id in ids if task_id != answered])


class RetryAfter(unittest.TestCase):
    def test_seconds_and_http_dates_are_honoured_and_capped_at_60(self) -> None:
        date = "Wed, 21 Oct 2015 07:28:00 GMT"
        moment = 1445412480.0  # that date, as a timestamp
        cases = [("5", 0.0, 5.0), ("120", 0.0, 60.0), (date, moment - 10, 10.0), (date, moment + 5, 0.0), (date, moment - 600, 60.0)]
        for value, now, seconds in cases:
            with self.subTest(value=value, now=now):
                self.assertEqual(retry_after_seconds(value, now), seconds)

    def test_a_missing_or_unreadable_header_means_use_the_backoff(self) -> None:
        for value in (None, "", "soon", "-1", "1.5"):
            with self.subTest(value):
                self.assertIsNone(retry_after_seconds(value, 0.0))
