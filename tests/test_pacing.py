"""Pacing to the provider's rate limits: the headers read, holds until a reset, 429s that wait what they say and
spend no retry, the concurrency that halves and comes back, and what the results record of it."""

from __future__ import annotations

import contextvars
import itertools
import json
import math
import os
import pty
import signal
import subprocess
import sys
import threading
import time
import unittest
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from unittest import mock

from backends.pacing import RATE_LIMITED, Allowance, allowances, duration_seconds, reset_seconds, retry_delay, told_wait
from backends.stub import StubBackend
from backends.transport import Transport
from harness import exchanges
from harness.records import AgentRequest, BackendError, Pacing, Reply, Result
from harness.reporters.console import pace_text
from harness.running import run_jobs
from harness.taskfile import load_task_file
from tests.providers import fake_openai, user_prompt
from tests.support import (
    CANNED,
    CANONICAL_TASKS,
    CLI_TIMEOUT,
    SCRIPT,
    InProcessAgent,
    LoopbackAgent,
    Received,
    Respond,
    TempDirTestCase,
    backend_for,
    canned,
    clean_env,
    run_cli,
    send_json,
    stop_signals_as_from_a_terminal,
)

NOW = 1_798_014_400.0  # 2026-12-23T08:26:40Z
GEMINI_429 = {
    "error": {
        "code": 429,
        "message": "You exceeded your current quota.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "58.217843437s"},
        ],
    }
}


class HeaderParsing(unittest.TestCase):
    def test_openai_resets_are_go_durations(self) -> None:
        for text, seconds in [
            ("1s", 1.0),
            ("20ms", 0.02),
            ("6m0s", 360.0),
            ("1m30.5s", 90.5),
            ("1h2m3s", 3723.0),
            ("0.5s", 0.5),
            ("250us", 0.00025),
            ("7", 7.0),  # Azure's bare seconds
            ("0", 0.0),
        ]:
            with self.subTest(text=text):
                self.assertAlmostEqual(duration_seconds(text), seconds)
        for text in ("", "s", "1x", "1s2", "-1", "soon", "2026-12-23T08:26:40Z"):
            with self.subTest(text=text):
                self.assertIsNone(duration_seconds(text))

    def test_anthropic_resets_are_rfc_3339_times(self) -> None:
        for text, seconds in [
            ("2026-12-23T08:26:52Z", 12.0),
            ("2026-12-23T08:26:41.5Z", 1.5),
            ("2026-12-23T09:26:50+01:00", 10.0),
            ("2026-12-23T08:26:40.123456789Z", 0.123456789),  # nanoseconds, which Python 3.10 cannot read alone
            ("2026-12-23T08:26:00Z", 0.0),  # past: no wait
            ("12ms", 0.012),
        ]:
            with self.subTest(text=text):
                self.assertAlmostEqual(reset_seconds(text, NOW), seconds, places=6)
        for text in ("2026-12-23", "2026-13-45T08:26:52Z", "tomorrow"):
            with self.subTest(text=text):
                self.assertIsNone(reset_seconds(text, NOW))

    def test_both_dialects_say_what_is_left_of_each_limit(self) -> None:
        openai = {
            "x-ratelimit-limit-requests": "5000",
            "x-ratelimit-remaining-requests": "4999",
            "x-ratelimit-reset-requests": "12ms",
            "x-ratelimit-limit-tokens": "160000",
            "x-ratelimit-remaining-tokens": "159976",
            "x-ratelimit-reset-tokens": "6m0s",
        }
        self.assertEqual(
            allowances(openai, NOW),
            {"requests": Allowance(4999, 0.012), "tokens": Allowance(159976, 360.0)},
        )
        anthropic = {
            f"anthropic-ratelimit-{kind}-{part}": value
            for kind, remaining in [("requests", "49"), ("tokens", "79000"), ("input-tokens", "39000")]
            for part, value in [("limit", "80000"), ("remaining", remaining), ("reset", "2026-12-23T08:26:46Z")]
        }
        anthropic |= {"anthropic-ratelimit-output-tokens-remaining": "8000"}
        self.assertEqual(
            allowances(anthropic, NOW),
            {
                "requests": Allowance(49, 6.0),
                "tokens": Allowance(79000, 6.0),
                "input-tokens": Allowance(39000, 6.0),
                "output-tokens": Allowance(8000, None),
            },
        )
        self.assertEqual(allowances({"x-ratelimit-remaining-tokens": "-1", "content-type": "json"}, NOW), {})

    def test_a_response_says_how_long_to_wait(self) -> None:
        spent = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}
        for status, headers, body, seconds in [
            (429, {"retry-after": "2"}, b"", 2.0),
            (429, {"retry-after-ms": "1500", "retry-after": "2"}, b"", 1.5),
            (429, {"retry-after": formatdate(NOW + 30, usegmt=True)}, b"", 30.0),
            (429, {"retry-after": "3600"}, b"", 60.0),  # capped
            (503, {"retry-after": "5"}, b"", 5.0),
            (429, {}, json.dumps(GEMINI_429).encode(), 58.217843437),
            (429, spent, b"", 1.0),
            (429, {**spent, "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6s"}, b"", 6.0),
            (200, spent, b"", None),  # a reset of a success is a hold of the pacer's, not a retry's wait
            (429, {"retry-after": "soon"}, b"not json", None),
            (429, {}, b"", None),
        ]:
            with self.subTest(status=status, headers=headers):
                wait = told_wait(status, headers, body, NOW)
                if seconds is None:
                    self.assertIsNone(wait)
                else:
                    self.assertAlmostEqual(wait, seconds, places=3)

    def test_gemini_retry_info_is_read_from_its_details(self) -> None:
        self.assertEqual(retry_delay(json.dumps(GEMINI_429).encode()), 58.217843437)
        for body in [b"", b"[]", b'{"error": {"details": "no"}}', b'{"error": {"details": [{"retryDelay": "3s"}]}}']:
            with self.subTest(body=body):
                self.assertIsNone(retry_delay(body))


class ProgressLine(unittest.TestCase):
    def test_the_progress_line_says_how_the_run_is_paced_only_when_it_is(self) -> None:
        calm = Pacing(16, 16, 16, 0, 0.0, None, None, 0.0, False, False)
        self.assertEqual(pace_text(calm), "")
        for pacing, text in [
            (
                Pacing(16, 6, 16, 3, 1.0, 38, 11.2, 0.0, True, True),
                "paced: concurrency 6/16 · 38 requests left, resets in 12 s",
            ),
            (Pacing(16, 8, 16, 1, 1.0, None, None, 2.5, True, True), "paced: concurrency 8/16 · next request in 3 s"),
            (
                Pacing(4, 4, 4, 0, 0.0, 1, 0.4, 0.0, True, True),
                "paced: concurrency 4/4 · 1 request left, resets in 1 s",
            ),
        ]:
            with self.subTest(text=text):
                self.assertEqual(pace_text(pacing), text)


class Holds(TempDirTestCase):
    """A Transport's requests, sent one after the other, held until the limit the last response spent resets."""

    def second_request_after(self, headers: dict[str, str], body: dict[str, str] | None = None) -> tuple[float, float]:
        """(when the first response was sent, when the second request arrived), each by the monotonic clock."""
        answered: list[float] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            answered.append(time.monotonic())
            send_json(handler, {"ok": True}, headers=headers if len(answered) == 1 else {})

        agent = self.serve(respond)
        transport = Transport(agent.url(), headers={}, timeout=10, retries=0, max_response_bytes=1 << 20)
        self.addCleanup(transport.close)
        transport.post_json(body or {"n": 1})
        transport.post_json(body or {"n": 2})
        return answered[0], agent.received[1].at

    def test_no_request_goes_before_spent_requests_reset_openai(self) -> None:
        answered, second = self.second_request_after(
            {
                "x-ratelimit-limit-requests": "60",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "1s",
            }
        )
        self.assertGreaterEqual(second - answered, 1.0)

    def test_no_request_goes_before_spent_requests_reset_anthropic(self) -> None:
        reset = math.ceil(time.time()) + 2
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(reset))
        arrived: list[float] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            arrived.append(time.time())
            spent = {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": stamp}
            send_json(handler, {"ok": True}, headers=spent if len(arrived) == 1 else {})

        agent = self.serve(respond)
        transport = Transport(agent.url(), headers={}, timeout=10, retries=0, max_response_bytes=1 << 20)
        self.addCleanup(transport.close)
        transport.post_json({"n": 1})
        transport.post_json({"n": 2})
        self.assertGreaterEqual(arrived[1], reset)

    def test_a_request_that_would_spend_more_tokens_than_are_left_waits_for_their_reset(self) -> None:
        prompt = {"prompt": "x" * 400}  # about 100 tokens, by its size
        left = {"x-ratelimit-remaining-requests": "10", "x-ratelimit-reset-requests": "1s"}
        answered, second = self.second_request_after(
            {**left, "x-ratelimit-remaining-tokens": "50", "x-ratelimit-reset-tokens": "1s"}, prompt
        )
        self.assertGreaterEqual(second - answered, 1.0)


class HostileHeaders(TempDirTestCase):
    def test_limit_headers_no_one_can_read_are_never_a_crash_nor_a_hold(self) -> None:
        huge = "9" * 5000  # past int()'s 4,300 digits
        wide = "9" * 400  # past a float's range
        for headers in [
            {"x-ratelimit-remaining-requests": "\u00b2", "x-ratelimit-reset-requests": "1s"},  # isdigit, not int()
            {"x-ratelimit-remaining-requests": huge, "x-ratelimit-reset-requests": "1s"},
            {"x-ratelimit-limit-requests": "\u00b2", "x-ratelimit-remaining-requests": "5"},
            {"x-ratelimit-limit-requests": huge, "x-ratelimit-remaining-requests": "5"},
            {"x-ratelimit-limit-requests": wide, "x-ratelimit-remaining-requests": "5"},
            {
                "x-ratelimit-limit-requests": "60",
                "x-ratelimit-remaining-requests": wide,
                "x-ratelimit-reset-requests": "1s",
            },
            {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "inf"},
            {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1e999"},
            {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": wide + "s"},
        ]:
            with self.subTest(headers={name: value[:12] for name, value in headers.items()}):
                transport = self.transport_answering_first_with(headers)
                self.assertEqual(transport.post_json({"n": 1}), ({"ok": True}, 1))
                self.assertEqual(transport.post_json({"n": 2}), ({"ok": True}, 1))  # no crash, no hold to the bound

    def transport_answering_first_with(self, headers: dict[str, str]) -> Transport:
        """A Transport to a fake that answers its first request with these headers and the others with none."""
        answered: list[Received] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            answered.append(received)
            send_json(handler, {"ok": True}, headers=headers if len(answered) == 1 else {})

        transport = Transport(self.serve(respond).url(), headers={}, timeout=10, retries=0, max_response_bytes=1 << 20)
        self.addCleanup(transport.close)
        return transport


class Interrupted(TempDirTestCase):
    def test_ctrl_c_while_the_rate_limits_hold_every_request_ends_the_run_at_once_with_its_results(self) -> None:
        spent = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "50s"}
        for held_by, concurrency in itertools.product(("retry-after", "reset"), ("1", "4")):
            with self.subTest(held_by=held_by, concurrency=concurrency):

                def respond(received: Received, handler: BaseHTTPRequestHandler, held_by: str = held_by) -> None:
                    if held_by == "retry-after":
                        send_json(handler, {"error": "slow down"}, 429, {"Retry-After": "60"})
                    else:
                        send_json(handler, CANNED[received.json["prompt"]], headers=spent)

                self.interrupt_when_held(respond, concurrency)

    def interrupt_when_held(self, respond: Respond, concurrency: str) -> None:
        agent = self.serve(respond)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT],
            cwd=self.tmp,
            env=clean_env(EVAL_AGENT_URL=agent.url(), EVAL_CONCURRENCY=concurrency, EVAL_RESULTS="r.json"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=stop_signals_as_from_a_terminal,
        )
        self.addCleanup(proc.kill)
        agent.wait_for_requests(1)
        time.sleep(0.5)  # the response heard: every request is now held for 50 s or more
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=25)  # half the hold: a run that waits it out does not get here
        self.assertEqual(proc.returncode, 130, stderr)
        self.assertEqual(len(agent.received), 1)
        self.assertTrue(self.read_json("r.json")["interrupted"])


class AfterAReset(TempDirTestCase):
    def test_past_a_reset_one_request_goes_first_and_its_response_lets_the_others_go(self) -> None:
        lock = threading.Lock()
        arrivals: list[int] = []  # requests in flight at the fake as each arrived
        in_flight = [0]

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            with lock:
                in_flight[0] += 1
                arrivals.append(in_flight[0])
                first = len(arrivals) == 1
            time.sleep(0.2)
            left = {"x-ratelimit-remaining-requests": "0" if first else "50", "x-ratelimit-reset-requests": "1s"}
            with lock:
                in_flight[0] -= 1
            send_json(handler, {"ok": True}, headers=left)

        agent = self.serve(respond)
        transport = Transport(agent.url(), headers={}, timeout=10, retries=0, max_response_bytes=1 << 20)
        transport.pacer.open(4)
        transport.post_json({"n": 0})  # none left, for a second
        self.addCleanup(transport.close)

        def post(n: int) -> None:
            try:
                transport.post_json({"n": n})
            finally:
                transport.close()  # this thread's connection

        threads = [threading.Thread(target=post, args=(n,)) for n in range(1, 5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        self.assertEqual(arrivals[1:3], [1, 1], arrivals)  # the first past the reset alone, and done before the next
        self.assertEqual(len(arrivals), 5)


class NoWait(TempDirTestCase):
    def test_a_429_that_says_to_wait_0_s_or_until_a_past_date_is_retried_after_the_backoff(self) -> None:
        for retry_after in ("0", formatdate(time.time() - 3600, usegmt=True)):
            with self.subTest(retry_after=retry_after):
                limited_at, agent = self.limited_once(retry_after)
                transport = Transport(agent.url(), headers={}, timeout=10, retries=1, max_response_bytes=1 << 20)
                self.addCleanup(transport.close)
                self.assertEqual(transport.post_json({"n": 1}), ({"ok": True}, 2))  # a retry spent
                self.assertGreaterEqual(agent.received[1].at - limited_at[0], 0.25)  # half the first backoff at least

    def test_a_429_whose_wait_passes_the_bound_ends_the_request_unsent_again(self) -> None:
        _, agent = self.limited_once("5")
        transport = Transport(agent.url(), headers={}, timeout=10, retries=1, max_response_bytes=1 << 20)
        self.addCleanup(transport.close)
        with mock.patch("backends.transport.RATE_LIMIT_WAIT", 1.0):  # the 600 s bound, brought within a test
            with self.assertRaises(BackendError) as caught:
                transport.post_json({"n": 1})
        self.assertEqual((caught.exception.code, len(agent.received)), (RATE_LIMITED, 1))

    def limited_once(self, retry_after: str) -> tuple[list[float], LoopbackAgent]:
        """A fake answering its first request 429 with this Retry-After, and when it did (monotonic)."""
        limited_at: list[float] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if not limited_at:
                limited_at.append(time.monotonic())
                send_json(handler, {"error": "slow down"}, 429, {"Retry-After": retry_after})
            else:
                send_json(handler, {"ok": True})

        return limited_at, self.serve(respond)


class FirstRequest(TempDirTestCase):
    def test_a_first_request_that_hangs_holds_the_others_no_longer_than_a_probe_may_take(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received.json["n"] == 0:
                agent.release.wait(CLI_TIMEOUT)  # the first hangs until the test ends (or its 60 s timeout)
            send_json(handler, {"ok": True})

        agent = self.serve(respond)
        transport = Transport(agent.url(), headers={}, timeout=CLI_TIMEOUT, retries=0, max_response_bytes=1 << 20)
        transport.pacer.open(4)

        def post(n: int) -> None:
            try:
                transport.post_json({"n": n})
            finally:
                transport.close()  # this thread's connection

        threads = [threading.Thread(target=post, args=(n,)) for n in range(3)]
        threads[0].start()
        agent.wait_for_requests(1)
        for thread in threads[1:]:
            thread.start()
        try:
            agent.wait_for_requests(3, timeout=20)  # the others go while the first still hangs
        finally:
            agent.release.set()
            for thread in threads:
                thread.join(timeout=CLI_TIMEOUT)


class FirstProviderRequest(TempDirTestCase):
    def test_a_provider_s_first_request_that_hangs_holds_the_others_5_s_at_most_and_none_of_it_in_their_latency(
        self,
    ) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if received is agent.received[0]:
                agent.release.wait(CLI_TIMEOUT)  # the first hangs until the others came (or its timeout)
            fake_openai(received, handler)

        agent = self.serve(respond)
        env = clean_env(
            EVAL_BACKEND="openai",
            EVAL_MODEL="fake-model",
            OPENAI_BASE_URL=agent.url("/v1"),
            OPENAI_API_KEY="sk-test",
            EVAL_CONCURRENCY="4",
            EVAL_TIMEOUT="50",
            EVAL_RESULTS="r.json",
        )
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT], cwd=self.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.addCleanup(proc.kill)
        try:
            agent.wait_for_requests(4, timeout=20)  # the others go while the first still hangs
        finally:
            agent.release.set()
        _, stderr = proc.communicate(timeout=CLI_TIMEOUT)
        self.assertEqual(proc.returncode, 0, stderr)
        first = agent.received[0]
        prompts = {user_prompt(received): received.at for received in agent.received[1:4]}
        held = {entry["prompt"]: entry for entry in self.read_json("r.json")["results"] if entry["prompt"] in prompts}
        self.assertEqual(len(held), 3)
        for prompt, entry in held.items():
            with self.subTest(task=entry["id"]):
                # The wait before it was sent is the harness's, not the model's: its latency starts at the sending.
                self.assertLess(entry["trialResults"][0]["durationMs"], (prompts[prompt] - first.at) * 1000)


class Spacing(TempDirTestCase):
    """Requests spread at the rate a limit header allows a second, and the first one alone."""

    def arrivals(self, headers: dict[str, str], requests: int, ceiling: int = 4) -> list[tuple[float, int]]:
        """(when each request arrived, how many were in flight then) at a fake answering 0.1 s later with headers."""
        lock = threading.Lock()
        seen: list[tuple[float, int]] = []
        in_flight = [0]

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            with lock:
                in_flight[0] += 1
                seen.append((time.monotonic(), in_flight[0]))
            time.sleep(0.1)
            with lock:
                in_flight[0] -= 1
            send_json(handler, {"ok": True}, headers=headers)

        agent = self.serve(respond)
        transport = Transport(agent.url(), headers={}, timeout=10, retries=0, max_response_bytes=1 << 20)
        transport.pacer.open(ceiling)

        def post(n: int) -> None:
            try:
                transport.post_json({"n": n})
            finally:
                transport.close()  # this thread's connection

        threads = [threading.Thread(target=post, args=(n,)) for n in range(requests)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        self.assertEqual(len(seen), requests)
        return seen

    def test_requests_go_no_faster_than_the_minutes_limit_spread_over_it(self) -> None:
        # 120 a minute, and what is left no more than a second's share of it, as a window shorter than the minute says:
        # that window must not see a burst.
        headers = {
            "x-ratelimit-limit-requests": "120",
            "x-ratelimit-remaining-requests": "2",
            "x-ratelimit-reset-requests": "1s",
        }
        seen = self.arrivals(headers, 5)
        gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(seen[1:])]
        for gap in gaps:
            self.assertGreaterEqual(gap, 0.45, gaps)  # 0.51 s apart, less what the server's clock adds between

    def test_a_bucket_fuller_than_a_seconds_refill_is_spent_at_once_as_anthropic_s_refills_up_to_the_minute(
        self,
    ) -> None:
        # 60 a minute, 50 left, full again in 10 s: a token bucket holding the minute's figure, as Anthropic documents
        # its limits, has room for a burst now, which spreading one a second would waste.
        headers = {
            "anthropic-ratelimit-requests-limit": "60",
            "anthropic-ratelimit-requests-remaining": "50",
            "anthropic-ratelimit-requests-reset": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 10)),
        }
        seen = self.arrivals(headers, 6)
        self.assertEqual(seen[0][1], 1)  # the first alone, to learn the limits
        self.assertGreater(max(flying for _, flying in seen[1:]), 1, seen)  # then together, not one a second

    def test_a_full_bucket_whose_reset_is_now_is_spent_at_once_too(self) -> None:
        # A bucket barely spent is full again within a fraction of a second: what its response said is left still is.
        headers = {
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "50",
            "x-ratelimit-reset-requests": "0s",
        }
        seen = self.arrivals(headers, 6)
        self.assertGreater(max(flying for _, flying in seen[1:]), 1, seen)

    def test_the_first_request_goes_alone_and_the_rest_as_the_ceiling_allows(self) -> None:
        seen = self.arrivals({}, 8)
        self.assertEqual(seen[0][1], 1)
        self.assertGreater(max(flying for _, flying in seen[1:]), 1, seen)

    def test_a_request_is_estimated_at_the_tokens_a_byte_the_endpoints_requests_cost(self) -> None:
        agent = self.serve(
            lambda received, handler: send_json(handler, {"usage": {"prompt_tokens": 25, "completion_tokens": 7}})
        )
        transport = Transport(
            agent.url(),
            headers={},
            timeout=10,
            retries=0,
            max_response_bytes=1 << 20,
            usage=lambda body: (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]),
        )
        self.addCleanup(transport.close)
        body = {"prompt": "x" * 990}  # 1,003 bytes as sent: 25 tokens is about 0.025 a byte
        self.assertEqual(transport.pacer.estimate("t", 1003), (250, 0))  # nothing said yet: a quarter of a byte
        transport.post_json(body)
        self.assertEqual(transport.pacer.estimate("another task", 1003), (25, 7))


class TokenEstimates(TempDirTestCase):
    def test_a_task_s_next_request_is_estimated_at_what_its_last_one_cost(self) -> None:
        answered: list[float] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            answered.append(time.monotonic())
            left = {"x-ratelimit-remaining-tokens": "500", "x-ratelimit-reset-tokens": "1s"}
            send_json(handler, {"usage": [900, 100]}, headers=left if len(answered) == 1 else {})

        agent = self.serve(respond)
        transport = Transport(
            agent.url(), headers={}, timeout=10, retries=0, max_response_bytes=1 << 20, usage=lambda body: body["usage"]
        )
        self.addCleanup(transport.close)

        def two_steps_of_one_task() -> None:
            exchanges.at(exchanges.Place("asset-get", 1, 1, 1))
            transport.post_json({"step": 1})
            transport.post_json({"step": 2})  # a dozen bytes, but the task's last request cost 1,000 tokens: 500 left

        contextvars.copy_context().run(two_steps_of_one_task)  # where the conversation says it is, for this test only
        self.assertGreaterEqual(agent.received[1].at - answered[0], 1.0)

    def test_a_request_the_limits_would_hold_past_the_bound_ends_at_once_unsent(self) -> None:
        spent = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "15m0s"}
        agent = self.serve(lambda received, handler: send_json(handler, {"ok": True}, headers=spent))
        transport = Transport(agent.url(), headers={}, timeout=10, retries=0, max_response_bytes=1 << 20)
        self.addCleanup(transport.close)
        transport.post_json({"n": 1})
        with self.assertRaises(BackendError) as caught:
            transport.post_json({"n": 2})
        self.assertEqual(
            (caught.exception.code, caught.exception.reason, caught.exception.attempts),
            (
                RATE_LIMITED,
                "the rate limit lets the next request go in 900s, past the 600s a request may wait on rate limits",
                0,
            ),
        )
        self.assertEqual(len(agent.received), 1)


class RateLimitedWave(TempDirTestCase):
    """A wave of requests ended rate-limited (as many in a row as the concurrency, no other ending between) stops the
    run: the rest are not run, and the gate fails for it."""

    def test_a_provider_that_answers_every_request_429_stops_the_run_after_a_wave_with_its_own_reason(self) -> None:
        # Every request 429, and the day's requests spent (reset in 15 minutes, past the 600 s a request may wait): each
        # request ends rate-limited after its one 429, so the test takes seconds where a Retry-After alone takes 600 s.
        spent = {"Retry-After": "1", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "15m0s"}
        agent = self.serve(lambda received, handler: send_json(handler, {"error": "slow down"}, 429, spent))
        env = clean_env(
            EVAL_AGENT_URL=agent.url(),
            EVAL_CONCURRENCY="2",
            EVAL_TIMEOUT="5",
            EVAL_RESULTS="r.json",
            EVAL_JUNIT="junit.xml",
        )
        out, err, code = run_cli(env=env, cwd=self.tmp)
        self.assertEqual(code, 1, out + err)
        results = self.read_json("r.json")
        self.assertIn("rate-limited", results["gateFailedBecause"])
        self.assertIn("not-run", results["gateFailedBecause"])
        codes = [trial["code"] for entry in results["results"] for trial in entry["trialResults"]]
        self.assertEqual(codes, [RATE_LIMITED] * len(codes))
        self.assertGreaterEqual(len(codes), 2)
        self.assertEqual(len(codes) + len(results["notRun"]), 10)
        self.assertGreaterEqual(len(results["notRun"]), 6)
        self.assertLessEqual(len(agent.received), 2)  # what the rest would have sent, it did not
        self.assertIn("the rate limits stopped the run", out.splitlines()[-1])
        self.assertIn("2 requests in a row ended rate-limited (reply:rate-limited), the rest were not sent", err)
        with open(os.path.join(self.tmp, "junit.xml"), encoding="utf-8") as junit:
            self.assertIn("rate-limited", junit.read())

    def test_a_429_whose_headers_say_the_limit_is_spent_past_the_bound_ends_its_request_at_once(self) -> None:
        # No Retry-After: the spent limit's reset is the 429's hint (capped at 60 s), and the reset itself is past the
        # 600 s a request may wait, so the request ends now, as the reset says (900 s), not after the hint's 60 s.
        spent = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "15m0s"}
        agent = self.serve(lambda received, handler: send_json(handler, {"error": "slow down"}, 429, spent))
        env = clean_env(EVAL_AGENT_URL=agent.url(), EVAL_CONCURRENCY="1", EVAL_RESULTS="r.json")
        out, err, code = run_cli("--category", "asset.search", env=env, cwd=self.tmp)
        self.assertEqual(code, 1, out + err)
        trials = [trial for entry in self.read_json("r.json")["results"] for trial in entry["trialResults"]]
        self.assertEqual(
            [(trial["code"], trial["reason"]) for trial in trials],
            [
                (
                    RATE_LIMITED,
                    "the rate limit lets the next request go in 900s, past the 600s a request may wait on rate limits",
                )
            ],
        )
        self.assertIn("stopped after 1 of 2 trials: 1 request in a row ended rate-limited (reply:rate-limited)", err)

    def test_a_provider_whose_429s_only_say_retry_after_stops_the_run_once_a_wave_waited_out_the_bound(self) -> None:
        # The provider: every request 429 with a Retry-After and nothing else. Each request waits out the bound
        # on rate limits (600 s, brought within a test), then ends rate-limited; the first wave stops the run.
        agent = self.serve(
            lambda received, handler: send_json(handler, {"error": "slow down"}, 429, {"Retry-After": "1"})
        )
        backend = backend_for({"EVAL_AGENT_URL": agent.url()})
        tasks = load_task_file(CANONICAL_TASKS).tasks
        results: list[Result] = []
        with mock.patch("backends.transport.RATE_LIMIT_WAIT", 2.0):
            ending = run_jobs(backend, tasks, concurrency=3, on_result=results.append)
        self.assertTrue(ending.rate_limited)
        self.assertLessEqual(len(results), 3)
        self.assertEqual({result.reply.error_code for result in results}, {RATE_LIMITED})

    def test_merge_keeps_the_reason_of_a_shard_the_rate_limits_stopped(self) -> None:
        spent = {"Retry-After": "1", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "15m0s"}
        limited = [True]

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if limited[0]:
                send_json(handler, {"error": "slow down"}, 429, spent)
            else:
                canned(received, handler)

        env = clean_env(EVAL_AGENT_URL=self.serve(respond).url())
        _, err, code = run_cli("--shard", "1/2", "--out", "s1.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 1, err)
        limited[0] = False
        _, err, code = run_cli("--shard", "2/2", "--out", "s2.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 0, err)
        out, err, code = run_cli("merge", "s1.json", "s2.json", "--allow-partial", "--out", "merged.json", cwd=self.tmp)
        self.assertEqual(code, 1, out + err)
        self.assertIn("rate-limited", self.read_json("merged.json")["gateFailedBecause"])

    def test_a_wave_is_as_many_rate_limited_endings_in_a_row_as_the_concurrency(self) -> None:
        tasks = load_task_file(CANONICAL_TASKS).tasks
        for endings, handed, stopped in [
            ("L.L.L.L.L.", 10, False),  # a success between every two: the provider still answers
            ("L.L.LL....", 6, True),
            ("LL........", 2, True),
        ]:
            with self.subTest(endings=endings):
                backend = InOrder(endings, [task.id for task in tasks])
                ending = run_jobs(backend, tasks, concurrency=2, on_result=backend.handed_on)
                self.assertEqual((ending.cut, ending.rate_limited), (None, stopped))
                self.assertEqual([result.task.id for result in backend.results], [task.id for task in tasks[:handed]])


class InOrder(InProcessAgent):
    """An agent that answers the run's tasks one after the other in their order, each once the run has handed on the
    result before it (so that the run hears of them in that order too, whichever worker sent which), the stub's reply
    or, where `endings` says L, an end in reply:rate-limited."""

    def __init__(self, endings: str, order: list[str]) -> None:
        super().__init__()
        self.endings = endings
        self.order = order
        self.turn = threading.Condition()
        self.results: list[Result] = []

    def handed_on(self, result: Result) -> None:
        with self.turn:
            self.results.append(result)
            self.turn.notify_all()

    def run(self, request: AgentRequest) -> Reply:
        number = self.order.index(request.task_id)
        with self.turn:
            self.turn.wait_for(lambda: len(self.results) == number, timeout=10)
        if self.endings[number] == "L":
            raise BackendError(RATE_LIMITED, "the rate limit lets the next request go in 900s", attempts=0)
        return StubBackend().run(request)


def limited_first(count: int) -> tuple[Respond, list[int]]:
    """An agent whose next `count` requests (the list's one item, which a test may set again) are answered 429 with
    `retry-after-ms: 100`, the rest as the stub does, each after 50 ms (so that requests overlap)."""
    lock = threading.Lock()
    limits = [count]

    def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
        with lock:
            limited = limits[0] > 0
            limits[0] -= limited
        if limited:
            send_json(handler, {"error": "slow down"}, 429, {"retry-after-ms": "100"})
        else:
            time.sleep(0.05)
            canned(received, handler)

    return respond, limits


class RateLimitedRuns(TempDirTestCase):
    def test_a_429_with_retry_after_waits_as_long_and_spends_no_retry(self) -> None:
        limited_at: list[float] = []

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if not limited_at:
                limited_at.append(time.monotonic())
                send_json(handler, {"error": "slow down"}, 429, {"Retry-After": "2"})
            else:
                canned(received, handler)

        agent = self.serve(respond)
        env = clean_env(
            EVAL_BACKEND="http",
            EVAL_AGENT_URL=agent.url(),
            EVAL_RETRIES="0",
            EVAL_CONCURRENCY="1",
            EVAL_RESULTS=os.path.join(self.tmp, "eval-results.json"),
        )
        out, err, code = run_cli(env=env)
        self.assertEqual(code, 0, out + err)
        self.assertGreaterEqual(agent.received[1].at - limited_at[0], 2.0)
        results = self.read_json("eval-results.json")
        self.assertEqual(results["passed"], 10)
        paced = results["manifest"]["rateLimits"]
        self.assertEqual(paced["rateLimited"], 1)
        self.assertGreaterEqual(paced["waitedMs"], 2000)
        self.assertEqual((paced["peakConcurrency"], paced["finalConcurrency"]), (1, 1))

    def test_concurrency_halves_on_429s_and_comes_back_up_to_the_ceiling(self) -> None:
        lock = threading.Lock()
        arrivals: list[tuple[int, int]] = []  # (status answered, requests in flight as it arrived)
        in_flight = [0]

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            with lock:
                in_flight[0] += 1
                limited = len(arrivals) < 4
                arrivals.append((429 if limited else 200, in_flight[0]))
            try:
                if limited:
                    send_json(handler, {"error": "slow down"}, 429, {"retry-after-ms": "200"})
                else:
                    time.sleep(0.1)  # the model's latency: requests overlap
                    send_json(handler, CANNED[received.json["prompt"]])
            finally:
                with lock:
                    in_flight[0] -= 1

        agent = self.serve(respond)
        env = clean_env(
            EVAL_BACKEND="http",
            EVAL_AGENT_URL=agent.url(),
            EVAL_RETRIES="0",
            EVAL_CONCURRENCY="4",
            EVAL_RUNS="5",
            EVAL_RESULTS=os.path.join(self.tmp, "eval-results.json"),
        )
        out, err, code = run_cli(env=env)
        self.assertEqual(code, 0, out + err)
        answered = [flight for status, flight in arrivals if status == 200]
        self.assertEqual(len(answered), 50)
        self.assertLessEqual(max(answered[:2]), 2, arrivals)  # halved after the 429s
        # and back up to the ceiling (the fake may count a request whose response it has sent as in flight still)
        self.assertGreaterEqual(max(answered), 4, arrivals)
        paced = self.read_json("eval-results.json")["manifest"]["rateLimits"]
        self.assertEqual((paced["rateLimited"], paced["peakConcurrency"], paced["finalConcurrency"]), (4, 4, 4))

    def test_a_run_whose_agent_never_spoke_of_its_limits_records_none(self) -> None:
        agent = self.serve(canned)
        env = clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=agent.url())
        _, _, code = run_cli("--out", "eval-results.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 0)
        self.assertNotIn("rateLimits", self.read_json("eval-results.json")["manifest"])

    def test_merge_sums_the_shards_429s_and_waits_and_keeps_the_highest_peak(self) -> None:
        respond, limits = limited_first(0)
        agent = self.serve(respond)
        env = clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=agent.url(), EVAL_RETRIES="0")
        shards = []
        for k, limited in [(1, 1), (2, 2), (3, 0)]:
            limits[0] = limited
            _, err, code = run_cli("--shard", f"{k}/3", "--out", f"s{k}.json", env=env, cwd=self.tmp)
            self.assertEqual(code, 0, err)
            shards.append(self.read_json(f"s{k}.json")["manifest"].get("rateLimits"))
        self.assertEqual([shard and shard["rateLimited"] for shard in shards], [1, 2, None])
        _, err, code = run_cli("merge", "s1.json", "s2.json", "s3.json", "--out", "merged.json", cwd=self.tmp)
        self.assertEqual(code, 0, err)
        first, second, _ = shards
        self.assertEqual(
            self.read_json("merged.json")["manifest"]["rateLimits"],
            {
                "rateLimited": 3,
                "waitedMs": round(first["waitedMs"] + second["waitedMs"], 1),
                "peakConcurrency": max(first["peakConcurrency"], second["peakConcurrency"]),
                "finalConcurrency": min(first["finalConcurrency"], second["finalConcurrency"]),
            },
        )

    def on_a_terminal(self, respond: Respond, *args: str) -> str:
        """What a run against this agent wrote on its terminal (stderr a pty), exiting 0."""
        agent = self.serve(respond)
        leader, follower = pty.openpty()
        self.addCleanup(os.close, leader)
        proc = subprocess.Popen(
            [sys.executable, "-S", SCRIPT, *args],
            cwd=self.tmp,
            env=clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=agent.url(), EVAL_RETRIES="0"),
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        proc.communicate(timeout=CLI_TIMEOUT)
        terminal = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            terminal += chunk
        self.assertEqual(proc.returncode, 0)
        return terminal.decode()

    def test_a_terminal_s_progress_line_says_how_the_run_is_paced(self) -> None:
        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            left = {"x-ratelimit-remaining-requests": "1000", "x-ratelimit-reset-requests": "1m0s"}
            send_json(handler, CANNED[received.json["prompt"]], headers=left)

        terminal = self.on_a_terminal(respond, "--runs", "3", "--concurrency", "4")
        self.assertRegex(
            terminal, r"elapsed( · ~\d+:\d\d left)? · paced: concurrency 4/4 · \d+ requests left, resets in \d+ s"
        )

    def test_a_terminal_s_progress_line_counts_down_a_wait_while_no_trial_ends(self) -> None:
        limited = [False]

        def respond(received: Received, handler: BaseHTTPRequestHandler) -> None:
            if not limited[0]:
                limited[0] = True
                send_json(handler, {"error": "slow down"}, 429, {"Retry-After": "3"})
            else:
                canned(received, handler)

        terminal = self.on_a_terminal(respond, "--concurrency", "1")
        self.assertIn("[0/10] 0 pass · 0 fail · 0 error · 0:0", terminal)
        self.assertRegex(terminal, r"paced: concurrency 1/1 · next request in [12] s")


if __name__ == "__main__":
    unittest.main()
