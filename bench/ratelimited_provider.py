"""A rate-limited fake provider on loopback: OpenAI's Chat Completions and Anthropic's Messages, for the bench
(bench/rate_limits.py) and the tests, standard library only.

It enforces a minute's limits in one of two ways:

  window   (Limiter) a requests-per-minute and a tokens-per-minute budget over a sliding window. Both providers say
           they enforce a minute's limit over shorter periods (600 a minute may be enforced as 10 a second), so the
           window is one second by default: a client then cannot beat the floor the limits imply (tasks / allowed
           rate) by a burst, as it could against a whole minute's budget.
  bucket   (TokenBuckets) as Anthropic documents its limits: a token bucket for each of requests, input tokens and
           output tokens a minute, refilled continuously at the minute's figure over the minute, up to the limit,
           rather than reset at fixed intervals; a bucket is full at the start and holds the minute's figure by
           default (`burst`: the seconds of refill it holds). Its headers say each bucket's level (remaining, tokens
           rounded to the nearest thousand as Anthropic rounds them) and when it is full again (reset); tokens-* is
           the sum of input and output, as Anthropic's responses say it where no workspace limit applies.

A request costs its estimated input tokens (its messages and system prompt at four characters a token; the window
leaves the tools' definitions out, so that the canonical tasks fit its scaled-down token budget, and the buckets count
them, as Anthropic does) plus its reply's output tokens (its text and calls at four characters a token), charged when
it is admitted, and the reply's usage says those same numbers. Every answer carries the provider's own rate-limit
headers:

  OpenAI      x-ratelimit-{limit,remaining,reset}-{requests,tokens}; resets as durations (20ms, 1s, 6m0s)
  Anthropic   anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}; resets as
              RFC 3339 times (remaining tokens not rounded)

The limits say the minute's figures; remaining and reset say the window's (or the bucket's): how many more requests
and tokens are admitted now, and when the window is whole (the bucket full) again. Over a budget the answer is 429
with Retry-After (whole seconds, and OpenAI's retry-after-ms) and the provider's error body, at once; a success comes
after the model's latency.

The reply to a prompt is the stub's canned reply (backends/stub_replies.json) for its first line, as tool calls, so
that every canonical task passes when answered. It counts what it saw: requests, 429s, resends (a request whose
same body, the same conversation step, it already admitted) and the peak in flight.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CANNED_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "backends", "stub_replies.json")
CHARS_PER_TOKEN = 4
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 429: "Too Many Requests"}


@dataclass(frozen=True)
class Charge:
    """What one admitted request cost, and when."""

    at: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Refusal:
    """A request over a budget: which one (requests or tokens), and how long until it would be admitted."""

    budget: str
    wait: float  # math.inf for a request larger than a whole window holds


@dataclass(frozen=True)
class Window:
    """A budget's state now: what is left in the window and how long until it is whole again."""

    remaining_requests: int
    remaining_tokens: int
    remaining_input_tokens: int
    remaining_output_tokens: int
    reset: float  # seconds until every charge in the window has left it


@dataclass(frozen=True)
class Figure:
    """One limit as a response's headers say it: the minute's figure, what is left now, seconds until it is whole."""

    limit: int
    remaining: int
    reset: float


KINDS = ("requests", "tokens", "input-tokens", "output-tokens")


class Limiter:
    """Requests and tokens per minute, enforced over a sliding window of `window` seconds (its share of them)."""

    COUNTS_TOOLS = False  # in a request's input tokens

    def __init__(self, requests_per_minute: int, tokens_per_minute: int, window: float = 1.0) -> None:
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.window = window
        self.requests = requests_per_minute * window / 60
        self.tokens = tokens_per_minute * window / 60
        self.charges: collections.deque[Charge] = collections.deque()

    def admit(self, now: float, input_tokens: int, output_tokens: int) -> Refusal | None:
        """Charge the request and return None, or say which budget it is over and how long until it is admitted."""
        self._expire(now)
        cost = input_tokens + output_tokens
        if cost > self.tokens:
            return Refusal("tokens", math.inf)
        requests_wait = tokens_wait = 0.0
        if len(self.charges) + 1 > self.requests:
            oldest = self.charges[len(self.charges) - math.floor(self.requests)]
            requests_wait = oldest.at + self.window - now
        spent = sum(charge.input_tokens + charge.output_tokens for charge in self.charges)
        for charge in self.charges:  # the oldest first: wait until enough of them have left
            if spent + cost <= self.tokens:
                break
            spent -= charge.input_tokens + charge.output_tokens
            tokens_wait = charge.at + self.window - now
        if requests_wait or tokens_wait:
            return Refusal("tokens" if tokens_wait > requests_wait else "requests", max(requests_wait, tokens_wait))
        self.charges.append(Charge(now, input_tokens, output_tokens))
        return None

    def state(self, now: float) -> Window:
        """What is left in the window now."""
        self._expire(now)
        spent_in = sum(charge.input_tokens for charge in self.charges)
        spent_out = sum(charge.output_tokens for charge in self.charges)
        return Window(
            remaining_requests=max(0, math.floor(self.requests) - len(self.charges)),
            remaining_tokens=max(0, math.floor(self.tokens) - spent_in - spent_out),
            remaining_input_tokens=max(0, math.floor(self.tokens) - spent_in),
            remaining_output_tokens=max(0, math.floor(self.tokens) - spent_out),
            reset=self.charges[-1].at + self.window - now if self.charges else 0.0,
        )

    def figures(self, now: float) -> dict[str, Figure]:
        """Each limit as the headers say it: the minute's figure, the window's remaining and reset."""
        window = self.state(now)
        return {
            "requests": Figure(self.requests_per_minute, window.remaining_requests, window.reset),
            "tokens": Figure(self.tokens_per_minute, window.remaining_tokens, window.reset),
            "input-tokens": Figure(self.tokens_per_minute, window.remaining_input_tokens, window.reset),
            "output-tokens": Figure(self.tokens_per_minute, window.remaining_output_tokens, window.reset),
        }

    def _expire(self, now: float) -> None:
        while self.charges and self.charges[0].at <= now - self.window:
            self.charges.popleft()


class Bucket:
    """One limit as a token bucket: a minute's figure refilled continuously, holding `burst` seconds' worth at most."""

    def __init__(self, per_minute: int, burst: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60
        self.capacity = self.rate * burst
        self.level = self.capacity  # full at the start
        self.at = -math.inf

    def refilled(self, now: float) -> float:
        """The bucket's level now."""
        return min(self.capacity, self.level + self.rate * max(0.0, now - self.at))

    def wait(self, now: float, amount: float) -> float:
        """Seconds until `amount` is in the bucket (0: now; math.inf: more than it ever holds)."""
        if amount > self.capacity:
            return math.inf
        return max(0.0, (amount - self.refilled(now)) / self.rate)

    def take(self, now: float, amount: float) -> None:
        self.level, self.at = self.refilled(now) - amount, now

    def figure(self, now: float, rounded: int = 1) -> Figure:
        """What the headers say of it: its level, rounded to the nearest `rounded` (down to the unit when it is less
        than one), and how long until it is full."""
        level = self.refilled(now)
        remaining = round(level / rounded) * rounded if level >= rounded else math.floor(level)
        return Figure(self.per_minute, remaining, (self.capacity - level) / self.rate)


class TokenBuckets:
    """Requests, input tokens and output tokens per minute, each a token bucket, as Anthropic documents its limits."""

    COUNTS_TOOLS = True
    ROUNDED = 1000  # the tokens remaining, as Anthropic's headers say them

    def __init__(
        self, requests_per_minute: int, input_tokens_per_minute: int, output_tokens_per_minute: int, burst: float = 60.0
    ) -> None:
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = input_tokens_per_minute + output_tokens_per_minute
        self.buckets = {
            "requests": Bucket(requests_per_minute, burst),
            "input-tokens": Bucket(input_tokens_per_minute, burst),
            "output-tokens": Bucket(output_tokens_per_minute, burst),
        }

    def admit(self, now: float, input_tokens: int, output_tokens: int) -> Refusal | None:
        """Take the request from every bucket and return None, or say which bucket it waits longest for and how long."""
        costs = {"requests": 1, "input-tokens": input_tokens, "output-tokens": output_tokens}
        waits = {kind: bucket.wait(now, costs[kind]) for kind, bucket in self.buckets.items()}
        longest = max(waits, key=lambda kind: waits[kind])
        if waits[longest] > 0:
            return Refusal(longest, waits[longest])
        for kind, bucket in self.buckets.items():
            bucket.take(now, costs[kind])
        return None

    def figures(self, now: float) -> dict[str, Figure]:
        """Each bucket as the headers say it: the minute's figure, its level, seconds until it is full; tokens-* the
        sum of input and output."""
        found = {
            kind: bucket.figure(now, 1 if kind == "requests" else self.ROUNDED) for kind, bucket in self.buckets.items()
        }
        both = [self.buckets["input-tokens"], self.buckets["output-tokens"]]
        level = sum(bucket.refilled(now) for bucket in both)
        remaining = round(level / self.ROUNDED) * self.ROUNDED if level >= self.ROUNDED else math.floor(level)
        found["tokens"] = Figure(
            self.tokens_per_minute, remaining, max(found["input-tokens"].reset, found["output-tokens"].reset)
        )
        return found


def go_duration(seconds: float) -> str:
    """A duration as OpenAI's reset headers write it (Go's format, to the millisecond): 20ms, 1s, 1.5s, 6m0s."""
    millis = math.ceil(seconds * 1000)
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def rfc3339(epoch: float) -> str:
    """A moment as Anthropic's reset headers write it: RFC 3339 in UTC, to the millisecond, rounded up."""
    moment = datetime.datetime.fromtimestamp(math.ceil(epoch * 1000) / 1000, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def estimated_tokens(value: Any) -> int:
    """Tokens of a JSON value, as a provider estimates them before counting: four characters a token."""
    return math.ceil(len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Counts:
    """What the fake saw."""

    requests: int
    rate_limited: int
    resends: int
    peak_in_flight: int
    tokens: int  # charged for the requests admitted: their input and output
    input_tokens: int = 0  # of which input


class RateLimitedProvider:
    """The fake, served by an asyncio loop in a thread of its own on 127.0.0.1, port 0, from start() to close()."""

    def __init__(
        self,
        requests_per_minute: int = 600,
        tokens_per_minute: int = 60_000,
        latency: float = 0.3,
        window: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        limiter: Limiter | TokenBuckets | None = None,
    ) -> None:
        """limiter: TokenBuckets for the bucket mode; by default the sliding window of these figures."""
        self.limiter = limiter or Limiter(requests_per_minute, tokens_per_minute, window)
        self.latency = latency
        self.clock = clock
        with open(CANNED_FILE, encoding="utf-8") as f:
            self.canned: dict[str, Any] = json.load(f)
        self.requests = self.rate_limited = self.resends = self.tokens = self.input_tokens = 0
        self.in_flight = self.peak_in_flight = 0
        self.admitted: set[str] = set()  # the SHA-256 of each body admitted, by path
        self.replies = 0
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> RateLimitedProvider:
        """Listen and serve; returns itself once the port is known."""
        self.thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=256), self.loop
        ).result(10)
        self.server = server
        self.port = server.sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        """Stop serving, end the connections still open, and the thread."""

        async def shut() -> None:
            self.server.close()
            connections = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in connections:
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> RateLimitedProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The base URL without a path: Anthropic's; OpenAI's is this plus /v1."""
        return f"http://127.0.0.1:{self.port}"

    def counts(self) -> Counts:
        """What it saw so far."""
        return Counts(
            self.requests, self.rate_limited, self.resends, self.peak_in_flight, self.tokens, self.input_tokens
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One keep-alive connection: requests one after another until the client closes it."""
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, path, _ = head[0].split(" ", 2)
                headers = {}
                for line in head[1:]:
                    name, _, value = line.partition(":")
                    if name:
                        headers[name.strip().lower()] = value.strip()
                if "content-length" not in headers:
                    await self._write(writer, 411, {}, b"")
                    break
                body = await reader.readexactly(int(headers["content-length"]))
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    status, extra, reply = await self._answer(method, path, body)
                finally:
                    self.in_flight -= 1
                await self._write(writer, status, extra, reply)
                if headers.get("connection", "").lower() == "close":
                    break
        # Cancelled by close(): ended quietly, as asyncio's streams of Python 3.11 log a connection task cancelled.
        except (asyncio.IncompleteReadError, asyncio.CancelledError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes) -> None:
        lines = [f"HTTP/1.1 {status} {REASONS[status]}", "Content-Type: application/json"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()

    async def _answer(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request; a success after the latency."""
        provider = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}.get(path.split("?")[0])
        if method != "POST" or provider is None:
            return 404, {}, json.dumps({"error": {"message": f"no route for {method} {path}"}}).encode()
        try:
            request = json.loads(body)
            messages = request["messages"]
        except (ValueError, KeyError, TypeError):
            return 400, {}, json.dumps({"error": {"message": "the body is not a request with messages"}}).encode()
        self.requests += 1
        key = hashlib.sha256(path.encode() + b"\0" + body).hexdigest()
        if key in self.admitted:
            self.resends += 1
        self.replies += 1
        text, named = self._said(messages)
        reply = self._reply(provider, text, named, self.replies)
        said = [request.get("system"), messages] + ([request.get("tools")] if self.limiter.COUNTS_TOOLS else [])
        input_tokens = estimated_tokens(said)
        output_tokens = estimated_tokens([text, named])
        now = self.clock()
        refusal = self.limiter.admit(now, input_tokens, output_tokens)
        limits = self._headers(provider, now)
        if refusal is not None:
            self.rate_limited += 1
            return 429, {**limits, **self._retry_after(provider, refusal.wait)}, self._over(provider, refusal)
        self.admitted.add(key)
        self.tokens += input_tokens + output_tokens
        self.input_tokens += input_tokens
        usage = (
            {"prompt_tokens": input_tokens, "completion_tokens": output_tokens}
            if provider == "openai"
            else {"input_tokens": input_tokens, "output_tokens": output_tokens}
        )
        if provider == "openai":
            usage["total_tokens"] = input_tokens + output_tokens
        await asyncio.sleep(self.latency)
        return 200, limits, json.dumps({**reply, "usage": usage}).encode()

    def _said(self, messages: list[Any]) -> tuple[str | None, list[tuple[str, Any]]]:
        """What the model says to the first line of the first user message: the stub's canned text and calls."""
        first = next((m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"), "")
        if isinstance(first, list):  # Anthropic's content blocks
            first = "".join(block.get("text", "") for block in first if isinstance(block, dict))
        canned = self.canned.get(str(first).split("\n", 1)[0], {})
        calls = canned.get("toolCalls") or ([canned["toolCall"]] if canned.get("toolCall") else [])
        text = canned.get("text") or (None if calls else "I can't help with that.")
        return text, [(call["name"].replace(".", "_"), call["args"]) for call in calls]

    @staticmethod
    def _reply(provider: str, text: str | None, named: list[tuple[str, Any]], number: int) -> dict[str, Any]:
        """What the model said in the provider's shape, without usage."""
        if provider == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if named:
                message["tool_calls"] = [
                    {
                        "id": f"call_{number}_{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                    for i, (name, args) in enumerate(named)
                ]
            finish = "tool_calls" if named else "stop"
            return {
                "id": f"chatcmpl-{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "fake-model",
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            }
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": f"toolu_{number}_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(named)
        ]
        return {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": "fake-model",
            "content": content,
            "stop_reason": "tool_use" if named else "end_turn",
            "stop_sequence": None,
        }

    def _headers(self, provider: str, now: float) -> dict[str, str]:
        """The provider's rate-limit headers for the limits as they stand after this request."""
        figures = self.limiter.figures(now)
        if provider == "openai":
            headers = {}
            for kind in ("requests", "tokens"):
                figure = figures[kind]
                headers[f"x-ratelimit-limit-{kind}"] = str(figure.limit)
                headers[f"x-ratelimit-remaining-{kind}"] = str(figure.remaining)
                headers[f"x-ratelimit-reset-{kind}"] = go_duration(figure.reset)
            return headers
        wall = time.time()
        headers = {}
        for kind in KINDS:
            figure = figures[kind]
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(figure.limit)
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(figure.remaining)
            headers[f"anthropic-ratelimit-{kind}-reset"] = rfc3339(wall + figure.reset)
        return headers

    @staticmethod
    def _retry_after(provider: str, wait: float) -> dict[str, str]:
        """Retry-After in whole seconds, rounded up (and OpenAI's retry-after-ms); none for a request never admitted."""
        if math.isinf(wait):
            return {}
        seconds = {"retry-after": str(max(1, math.ceil(wait)))}
        return {**seconds, "retry-after-ms": str(math.ceil(wait * 1000))} if provider == "openai" else seconds

    def _over(self, provider: str, refusal: Refusal) -> bytes:
        """The provider's 429 body."""
        limiter = self.limiter
        if provider == "openai":
            per_minute = "requests per min (RPM)" if refusal.budget == "requests" else "tokens per min (TPM)"
            limit = limiter.requests_per_minute if refusal.budget == "requests" else limiter.tokens_per_minute
            again = "" if math.isinf(refusal.wait) else f" Please try again in {go_duration(refusal.wait)}."
            message = (
                f"Rate limit reached for fake-model in organization org-fake on {per_minute}: Limit {limit}.{again}"
            )
            kind = "requests" if refusal.budget == "requests" else "tokens"
            error = {"message": message, "type": kind, "param": None, "code": "rate_limit_exceeded"}
            return json.dumps({"error": error}).encode()
        limit = limiter.figures(self.clock())[refusal.budget].limit
        message = (
            f"This request would exceed the rate limit for your organization of {limit}"
            f" {refusal.budget.replace('-', ' ')} per minute. Please try again later."
        )
        return json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": message}}).encode()
