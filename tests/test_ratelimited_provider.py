"""The bench's rate-limited fake provider: its sliding window and its token buckets, its headers and 429s as each
provider writes them, what it counts, and 64 connections at once."""

from __future__ import annotations

import datetime
import http.client
import json
import math
import threading
import unittest
from typing import Any

from bench.ratelimited_provider import (
    Figure,
    Limiter,
    RateLimitedProvider,
    Refusal,
    TokenBuckets,
    go_duration,
    rfc3339,
)


class SlidingWindow(unittest.TestCase):
    def test_a_minutes_requests_are_admitted_a_windows_share_at_a_time(self) -> None:
        limiter = Limiter(requests_per_minute=600, tokens_per_minute=1_000_000, window=1.0)
        for tenth in range(10):
            self.assertIsNone(limiter.admit(tenth / 10, 5, 5), tenth)
        refusal = limiter.admit(0.95, 5, 5)
        assert refusal is not None
        self.assertEqual(refusal.budget, "requests")
        self.assertAlmostEqual(refusal.wait, 0.05)  # until the first request leaves the window
        self.assertIsNone(limiter.admit(1.0, 5, 5), "the first request has left the window")
        self.assertIsNotNone(limiter.admit(1.05, 5, 5), "the second has not")

    def test_tokens_are_the_input_and_output_of_the_requests_in_the_window(self) -> None:
        limiter = Limiter(requests_per_minute=6000, tokens_per_minute=600, window=1.0)  # 10 tokens a second
        self.assertIsNone(limiter.admit(0.0, 4, 2))
        self.assertIsNone(limiter.admit(0.5, 1, 1))
        self.assertEqual(limiter.admit(0.6, 2, 1), Refusal("tokens", 0.4))
        self.assertIsNone(limiter.admit(1.0, 2, 1), "the first request's 6 tokens have left the window")
        self.assertEqual(limiter.admit(1.0, 11, 0), Refusal("tokens", math.inf), "more than a whole window holds")

    def test_the_window_says_what_is_left_and_when_it_is_whole_again(self) -> None:
        limiter = Limiter(requests_per_minute=600, tokens_per_minute=60_000, window=1.0)
        limiter.admit(0.0, 30, 20)
        limiter.admit(0.25, 10, 5)
        window = limiter.state(0.5)
        self.assertEqual(
            (window.remaining_requests, window.remaining_tokens, window.remaining_input_tokens),
            (8, 1000 - 65, 1000 - 40),
        )
        self.assertEqual(window.remaining_output_tokens, 1000 - 25)
        self.assertAlmostEqual(window.reset, 0.75)
        self.assertEqual(limiter.state(2.0).reset, 0.0)


class Buckets(unittest.TestCase):
    def test_a_full_bucket_admits_its_whole_minute_at_once_then_refills_continuously(self) -> None:
        buckets = TokenBuckets(requests_per_minute=60, input_tokens_per_minute=6000, output_tokens_per_minute=6000)
        for n in range(60):
            self.assertIsNone(buckets.admit(0.0, 10, 10), n)
        refusal = buckets.admit(0.0, 10, 10)
        assert refusal is not None
        self.assertEqual(refusal.budget, "requests")
        self.assertAlmostEqual(refusal.wait, 1.0)  # one request a second comes back
        self.assertIsNotNone(buckets.admit(0.5, 10, 10), "half a request has come back")
        self.assertIsNone(buckets.admit(1.0, 10, 10), "a whole one has")

    def test_input_tokens_are_a_bucket_of_their_own(self) -> None:
        # 100 input tokens a second, and more than enough requests and output tokens: input is the wall.
        buckets = TokenBuckets(6000, 6000, 60000, burst=1.0)
        self.assertIsNone(buckets.admit(0.0, 80, 1))
        self.assertEqual(buckets.admit(0.1, 80, 1), Refusal("input-tokens", 0.5))  # 30 in the bucket, 50 short
        self.assertIsNone(buckets.admit(0.6, 80, 1))
        self.assertEqual(buckets.admit(0.6, 101, 0), Refusal("input-tokens", math.inf), "more than it ever holds")

    def test_the_headers_say_each_bucket_s_level_to_the_thousand_and_when_it_is_full(self) -> None:
        buckets = TokenBuckets(600, 60_000, 30_000)  # buckets of the minute's figure: 600, 60,000 and 30,000
        buckets.admit(0.0, 20_400, 1_000)
        figures = buckets.figures(0.0)
        self.assertEqual(figures["requests"], Figure(600, 599, 0.1))
        self.assertEqual(figures["input-tokens"].remaining, 40_000)  # 39,600, to the nearest thousand
        self.assertAlmostEqual(figures["input-tokens"].reset, 20.4)  # 20,400 tokens back at 1,000 a second
        self.assertEqual(figures["output-tokens"].remaining, 29_000)
        self.assertAlmostEqual(figures["output-tokens"].reset, 2.0)
        self.assertEqual(figures["tokens"].limit, 90_000)  # input and output together, as Anthropic says them
        self.assertEqual(figures["tokens"].remaining, 69_000)  # 68,600
        self.assertAlmostEqual(figures["tokens"].reset, 20.4)
        self.assertEqual(buckets.figures(30.0)["input-tokens"], Figure(60_000, 60_000, 0.0))


class WireFormats(unittest.TestCase):
    def test_durations_are_written_as_openai_writes_them(self) -> None:
        cases = {0: "0s", 0.02: "20ms", 0.0201: "21ms", 1: "1s", 1.5: "1.5s", 360: "6m0s", 61.25: "1m1.25s"}
        for seconds, written in cases.items():
            with self.subTest(seconds):
                self.assertEqual(go_duration(seconds), written)

    def test_moments_are_rfc_3339_in_utc(self) -> None:
        self.assertEqual(rfc3339(1_764_480_000.2501), "2025-11-30T05:20:00.251Z")


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(response.read())
    finally:
        conn.close()


def openai_body(prompt: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": prompt}]}


SEARCH = "Pull up everything we've tagged summer-campaign-2026, I need to pick a hero shot."
GET = "How big is ast_7f3k2p9q, and who uploaded it?"


class OverLoopback(unittest.TestCase):
    def fake(self, **limits: Any) -> RateLimitedProvider:
        """A fake whose clock stands still: the window never moves while a test runs, however slow the machine."""
        fake = RateLimitedProvider(latency=0.0, clock=lambda: 100.0, **limits).start()
        self.addCleanup(fake.close)
        return fake

    def test_openai_answers_with_its_headers_then_429_with_retry_after_and_counts_a_resend(self) -> None:
        fake = self.fake(requests_per_minute=120)  # 2 in the window
        status, headers, reply = post(fake.port, "/v1/chat/completions", openai_body(SEARCH))
        self.assertEqual(status, 200)
        call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
        self.assertEqual(
            (call["name"], json.loads(call["arguments"])["tags"]), ("imageman_asset_search", ["summer-campaign-2026"])
        )
        usage = reply["usage"]
        self.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + usage["completion_tokens"])
        self.assertEqual(headers["x-ratelimit-limit-requests"], "120")
        self.assertEqual(headers["x-ratelimit-limit-tokens"], "60000")
        self.assertEqual(headers["x-ratelimit-remaining-requests"], "1")
        self.assertEqual(headers["x-ratelimit-remaining-tokens"], str(1000 - usage["total_tokens"]))
        self.assertEqual(headers["x-ratelimit-reset-requests"], "1s")
        self.assertEqual(headers["x-ratelimit-reset-tokens"], "1s")
        self.assertEqual(post(fake.port, "/v1/chat/completions", openai_body(GET))[0], 200)

        status, headers, reply = post(fake.port, "/v1/chat/completions", openai_body(SEARCH + "\nTicket 2."))
        self.assertEqual(status, 429)
        self.assertEqual((headers["retry-after"], headers["retry-after-ms"]), ("1", "1000"))
        self.assertEqual(headers["x-ratelimit-remaining-requests"], "0")
        self.assertEqual((reply["error"]["code"], reply["error"]["type"]), ("rate_limit_exceeded", "requests"))
        self.assertIn("Please try again in 1s.", reply["error"]["message"])

        self.assertEqual(post(fake.port, "/v1/chat/completions", openai_body(SEARCH))[0], 429)
        counts = fake.counts()
        self.assertEqual((counts.requests, counts.rate_limited, counts.resends), (4, 2, 1))

    def test_anthropic_answers_with_its_headers_and_rfc_3339_resets(self) -> None:
        fake = self.fake(requests_per_minute=60)  # 1 in the window
        body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": GET}]}
        status, headers, reply = post(fake.port, "/v1/messages", body)
        self.assertEqual(status, 200)
        self.assertEqual([block["type"] for block in reply["content"]], ["tool_use"])
        self.assertEqual(reply["content"][0]["input"], {"assetId": "ast_7f3k2p9q"})
        for name in ("requests", "tokens", "input-tokens", "output-tokens"):
            with self.subTest(name):
                self.assertIn(f"anthropic-ratelimit-{name}-limit", headers)
                self.assertIn(f"anthropic-ratelimit-{name}-remaining", headers)
                reset = headers[f"anthropic-ratelimit-{name}-reset"]
                self.assertRegex(reset, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
                datetime.datetime.fromisoformat(reset.replace("Z", "+00:00"))
        self.assertEqual(headers["anthropic-ratelimit-requests-remaining"], "0")
        spent = reply["usage"]["input_tokens"] + reply["usage"]["output_tokens"]
        self.assertEqual(headers["anthropic-ratelimit-tokens-remaining"], str(1000 - spent))

        status, headers, reply = post(
            fake.port, "/v1/messages", {**body, "messages": [{"role": "user", "content": SEARCH}]}
        )
        self.assertEqual((status, headers["retry-after"]), (429, "1"))
        self.assertNotIn("retry-after-ms", headers)
        self.assertEqual((reply["type"], reply["error"]["type"]), ("error", "rate_limit_error"))

    def test_anthropic_over_its_input_tokens_bucket_is_a_429_naming_it_and_counts_the_tools(self) -> None:
        # 1,200 input tokens a minute, in a bucket of a second's refill: 20, less than one request with its tools.
        limiter = TokenBuckets(600, 1200, 60_000, burst=1.0)
        fake = RateLimitedProvider(latency=0.0, clock=lambda: 100.0, limiter=limiter).start()
        self.addCleanup(fake.close)
        body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": GET}]}
        status, headers, reply = post(fake.port, "/v1/messages", body)
        self.assertEqual((status, reply["error"]["type"]), (429, "rate_limit_error"))
        self.assertIn("of 1200 input tokens per minute", reply["error"]["message"])
        self.assertNotIn("retry-after", headers)  # never admitted, however long it waits

        fake = RateLimitedProvider(latency=0.0, clock=lambda: 100.0, limiter=TokenBuckets(600, 10**6, 10**6)).start()
        self.addCleanup(fake.close)
        tools = [{"name": "imageman_asset_get", "description": "x" * 400, "input_schema": {"type": "object"}}]
        without = post(fake.port, "/v1/messages", body)[2]["usage"]["input_tokens"]
        counted = post(fake.port, "/v1/messages", {**body, "tools": tools})[2]["usage"]["input_tokens"]
        self.assertGreater(counted, without + 100)  # the tools' 400 characters and more

    def test_a_refusal_is_answered_with_text_and_no_call(self) -> None:
        fake = self.fake()
        prompt = next(p for p in fake.canned if "Ignore" in p)
        status, _, reply = post(fake.port, "/v1/chat/completions", openai_body(prompt))
        message = reply["choices"][0]["message"]
        self.assertEqual((status, "tool_calls" in message), (200, False))
        self.assertIn("can't share", message["content"])

    def test_64_connections_are_served_at_once(self) -> None:
        fake = RateLimitedProvider(requests_per_minute=100_000, tokens_per_minute=10_000_000, latency=2.0).start()
        self.addCleanup(fake.close)
        start = threading.Barrier(64, timeout=30)
        statuses: list[int] = []

        def client(number: int) -> None:
            start.wait()
            statuses.append(post(fake.port, "/v1/chat/completions", openai_body(f"{GET}\nTicket {number}."))[0])

        clients = [threading.Thread(target=client, args=(number,)) for number in range(64)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(60)
        self.assertEqual(statuses, [200] * 64)
        self.assertEqual(fake.counts().peak_in_flight, 64)


if __name__ == "__main__":
    unittest.main()
