"""Pacing: a run's requests to one endpoint at the speed its rate limits allow.

Providers say where the wall is on every response: OpenAI in `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`
(resets as durations, `6m0s`, `20ms`), Anthropic in `anthropic-ratelimit-{requests,tokens,input-tokens,
output-tokens}-{limit,remaining,reset}` (resets as RFC 3339 times), anyone in `retry-after` (seconds or an HTTP date)
or `retry-after-ms`, and Gemini in a 429's body (google.rpc.RetryInfo's `retryDelay`, `58s`). A Pacer, one per
Transport, reads them all and holds each attempt until a slot is free under the current concurrency and the known
remaining requests and tokens allow it; a 429 halves the concurrency and successes raise it again, one at a time, up
to the run's EVAL_CONCURRENCY. An endpoint that says nothing of its limits costs a lock and a counter per attempt.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Mapping

from harness import exchanges
from harness.records import BackendError, Pacing, record

RETRY_AFTER_CAP = 60.0  # seconds: the longest wait one hint buys
# The longest one request waits on rate limits in all, holds and hinted 429s together: a run never hangs for ever.
RATE_LIMIT_WAIT = max(600.0, 10 * RETRY_AFTER_CAP)
RATE_LIMITED = "reply:rate-limited"
KINDS = ("requests", "tokens", "input-tokens", "output-tokens")
DIALECTS = ("x-ratelimit-{part}-{kind}", "anthropic-ratelimit-{kind}-{part}")  # OpenAI (and gateways), Anthropic
# (kind, the header saying what is left of it, the header saying when it resets), in each dialect
HEADERS = tuple(
    (kind, dialect.format(part="remaining", kind=kind), dialect.format(part="reset", kind=kind))
    for dialect in DIALECTS
    for kind in KINDS
)
REMAINING = frozenset(remaining for _, remaining, _ in HEADERS)
DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
PROTO_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")
RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", re.IGNORECASE)
UNLIMITED = 1 << 30  # the ceiling until the run sets its own
# seconds: how long the run's first request, or the first after a reset, may take to say what is left before the
# others go regardless
PROBE_WAIT = 5.0
# A limit's header gives the minute's figure (requests or tokens per minute: OpenAI and Anthropic alike): requests are
# spaced to this share of it, so that a window the provider enforces over less than a minute is never overrun.
PER_MINUTE = 60.0
SAFETY = 0.98
LIMITS = tuple((kind, dialect.format(part="limit", kind=kind)) for dialect in DIALECTS for kind in KINDS)
# A limit's figure as the pacer reads it: ASCII digits (str.isdigit takes `²`, which int() refuses), few enough that
# int() takes them and a float holds them exactly; a longer one is no limit anyone has.
COUNT = re.compile(r"\d{1,15}", re.ASCII)


@record
class Allowance:
    """What a provider said is left of one limit, and in how many seconds it is whole again (None: not said)."""

    remaining: int
    reset: float | None


def duration_seconds(text: str) -> float | None:
    """Seconds in a duration as OpenAI writes a reset (`6m0s`, `1.5s`, `20ms`; Go's format) or a bare number of
    seconds (as Azure writes it); None when it is neither."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = DURATION_PART.findall(text)
        if not parts or "".join(number + unit for number, unit in parts) != text:
            return None
        seconds = sum(float(number) * DURATION_UNITS[unit] for number, unit in parts)
    return seconds if 0 <= seconds < math.inf else None  # `nan`, `inf`, `1e999`: no duration


def timestamp(text: str) -> float | None:
    """The POSIX time of an RFC 3339 date and time (`2026-12-02T06:50:03Z`, `...03.25+01:00`), as Anthropic writes a
    reset; None when it is not one."""
    from datetime import datetime

    found = RFC3339.fullmatch(text.strip())
    if found is None:
        return None
    whole, fraction, zone = found.groups()
    zone = "+00:00" if zone.upper() == "Z" else zone  # Python 3.10's fromisoformat takes neither Z nor nanoseconds
    try:
        when = datetime.fromisoformat(whole.replace("t", "T") + zone).timestamp()
    except ValueError:
        return None
    return when + (float(f"0.{fraction}") if fraction else 0.0)


def reset_seconds(text: str, now: float) -> float | None:
    """Seconds from now (a POSIX time) until a reset, written as a duration or as an RFC 3339 time; None if unread."""
    seconds = duration_seconds(text)
    if seconds is not None:
        return seconds
    when = timestamp(text)
    return None if when is None else max(0.0, when - now)


def allowances(headers: Mapping[str, str], now: float) -> dict[str, Allowance]:
    """Each limit a response's headers say is left (requests, tokens, input-tokens, output-tokens), in either dialect;
    a limit whose remaining is not a whole number is left out."""
    found: dict[str, Allowance] = {}
    if REMAINING.isdisjoint(headers):  # what most responses of most agents say: nothing
        return found
    for kind, remaining_header, reset_header in HEADERS:
        remaining = headers.get(remaining_header)
        if remaining is None or not COUNT.fullmatch(remaining.strip()):
            continue
        reset = headers.get(reset_header)
        found[kind] = Allowance(int(remaining), reset_seconds(reset, now) if reset else None)
    return found


def rates(headers: Mapping[str, str]) -> dict[str, float]:
    """Each limit's rate a second, from the minute's figure its `limit` header says (positive whole numbers only)."""
    found = {}
    for kind, header in LIMITS:
        limit = headers.get(header, "").strip()
        if COUNT.fullmatch(limit) and int(limit) > 0:
            found[kind] = int(limit) / PER_MINUTE * SAFETY
    return found


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds to wait per a Retry-After header (seconds or an HTTP date), capped; None when absent or unreadable."""
    value = (value or "").strip()
    if value.isascii() and value.isdigit():
        return min(float(value), RETRY_AFTER_CAP)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, min(when - now, RETRY_AFTER_CAP))


def retry_delay(body: bytes) -> float | None:
    """Seconds a Gemini 429's body asks to wait: its error's google.rpc.RetryInfo `retryDelay` (`58s`, `1.5s`)."""
    try:
        details = json.loads(body)["error"]["details"]
    except (ValueError, RecursionError, KeyError, TypeError):
        return None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            found = PROTO_DURATION.fullmatch(str(detail.get("retryDelay", "")))
            if found:
                return float(found[1])
    return None


def told_wait(status: int, headers: Mapping[str, str], body: bytes, now: float) -> float | None:
    """How long a response says to wait before the next request, capped at RETRY_AFTER_CAP; None when it does not say.

    retry-after-ms, else retry-after; for a 429 besides, Gemini's RetryInfo, else the latest reset of a limit the
    headers say is spent.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = duration_seconds(millis)
        if seconds is not None:
            return min(seconds / 1000, RETRY_AFTER_CAP)
    seconds = retry_after_seconds(headers.get("retry-after"), now)
    if seconds is not None or status != 429:
        return seconds
    seconds = retry_delay(body)
    if seconds is None:
        resets = [a.reset for a in allowances(headers, now).values() if a.remaining == 0 and a.reset is not None]
        seconds = max(resets) if resets else None
    return None if seconds is None else min(seconds, RETRY_AFTER_CAP)


# One attempt let through: its number in the order sent, the tokens sent up to and with it, and when it went
# (monotonic). A tuple rather than a record: one is made for every attempt, and the fast path is to cost nothing.
Ticket = tuple[int, int, float]


class Pacer:
    """Holds each attempt to one endpoint until the concurrency and the provider's known limits let it go."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self.ceiling = UNLIMITED
        self._concurrency = UNLIMITED
        self._in_flight = 0
        self._peak = 0
        self._sent = 0
        self._tokens_sent = 0
        # Nothing said of limits, nothing held, the concurrency at its ceiling, a response heard: the fast path.
        self._calm = False
        self._heard = False  # a first response came: until then one request goes alone, to learn the limits
        self._first_until = 0.0  # when the others go regardless, if the first request's response has not come
        self._told = False  # whether the endpoint ever said anything of its limits
        # kind -> (remaining, when it resets, when the request that said so went: monotonic)
        self._limits: dict[str, tuple[int, float, float]] = {}
        self._rates: dict[str, float] = {}  # kind -> what it allows a second, from its limit header
        self._next: dict[str, float] = {}  # kind -> when the next request may go by its rate (monotonic)
        self._probing: set[str] = set()  # limits past their reset, until a response says what is left of them
        self._latest = 0  # the number of the latest attempt whose response set the limits
        self._held_until = 0.0
        self._cut_at = 0  # attempts numbered below were sent before the last cut: their 429s do not cut again
        self._successes = 0
        self._waiting = 0
        self._limited = 0
        self._waited = 0.0
        self._usage: dict[str, tuple[int, int]] = {}  # a task's last request's (input, output) tokens
        self._per_byte: float | None = None  # input tokens a byte of request, as the responses reported them
        self._output = 0  # output tokens of the latest response that reported them

    def open(self, ceiling: int) -> None:
        """Start a run of at most `ceiling` requests at a time."""
        with self._lock:
            self.ceiling = self._concurrency = ceiling

    def estimate(self, task: str | None, size: int) -> tuple[int, int]:
        """A request's (input, output) tokens: what the task's last request cost, else its size at the tokens a byte
        the endpoint's requests cost so far (a quarter of a token before any said)."""
        known = self._usage.get(task or "")
        if known:
            return known
        per_byte = self._per_byte
        return (size // 4, 0) if per_byte is None else (round(size * per_byte), self._output)

    def spent(self, task: str | None, usage: tuple[int, int], size: int = 0) -> None:
        """What a request of `size` bytes cost, for the estimates of the next: the task's, kept only against a limit on
        tokens, and the endpoint's tokens a byte. Under the lock: the limits it looks at change in other threads."""
        with self._lock:
            if size > 0:
                per_byte = usage[0] / size
                self._per_byte = per_byte if self._per_byte is None else (self._per_byte * 3 + per_byte) / 4
                self._output = usage[1]
            if self._limits.keys() & {"tokens", "input-tokens", "output-tokens"} or self._rates.keys() - {"requests"}:
                self._usage[task or ""] = usage

    def acquire(self, cost: tuple[int, int], deadline: float) -> Ticket:
        """Wait for this attempt's turn; BackendError when its turn would come after deadline (monotonic)."""
        with self._lock:
            if not (self._calm and self._in_flight < self._concurrency):
                self._wait_turn(cost, deadline)
            self._in_flight += 1
            if self._in_flight > self._peak:
                self._peak = self._in_flight
            self._sent += 1
            self._tokens_sent += cost[0] + cost[1]
            now = time.monotonic()
            if self._sent == 1:
                self._first_until = now + PROBE_WAIT
            if self._limits or self._rates:  # what this attempt takes is no longer left to the next
                costs = _costs(cost)
                for kind, rate in self._rates.items():
                    # Taken from what is left over a second's refill, it is no turn at the rate: the next one's
                    # turn comes from now, however many went before it so.
                    due = now if self._spare(kind, costs[kind]) else max(self._next.get(kind, now), now)
                    self._next[kind] = due + costs[kind] / rate
                for kind, (remaining, reset, at) in self._limits.items():
                    self._limits[kind] = (remaining - costs[kind], reset, at)
            return self._sent, self._tokens_sent, now

    def _wait_turn(self, cost: tuple[int, int], deadline: float) -> None:
        started = time.monotonic()
        self._waiting += 1
        try:
            while True:
                now = time.monotonic()
                wait = self._wait(now, cost)
                if wait <= 0:
                    return
                if now + wait > deadline:
                    raise BackendError(
                        RATE_LIMITED,
                        f"the rate limit lets the next request go in {wait:.0f}s, past the {RATE_LIMIT_WAIT:.0f}s "
                        "a request may wait on rate limits",
                    )
                self._turn.wait(min(wait, 1.0))
        finally:
            self._waiting -= 1
            waited = time.monotonic() - started
            self._waited += waited
            exchanges.held(waited)

    def _wait(self, now: float, cost: tuple[int, int]) -> float:
        """Seconds until this attempt may go (a slot's wait is a notify's: a second at most), or 0 now."""
        if now < self._held_until:
            # Held by a 429's hint, capped; a limit it says is spent for longer holds it that long, however it is cut.
            costs = _costs(cost)
            spent = max(
                (
                    reset - now
                    for kind, (remaining, reset, _) in self._limits.items()
                    if kind not in self._rates and kind not in self._probing and remaining < costs[kind]
                ),
                default=0.0,
            )
            return max(self._held_until - now, spent)
        if not self._heard and self._in_flight and now < self._first_until:
            return 1.0  # the first response says what the limits are (a notify's wait), unless it is slow to come
        costs = _costs(cost)
        spaced = max((due for kind, due in self._next.items() if not self._spare(kind, costs[kind])), default=0.0)
        if spaced > now:
            return spaced - now
        for kind in list(self._limits):
            remaining, reset, at = self._limits[kind]
            rate = self._rates.get(kind)
            if rate is not None:
                # What is left refills at the limit's rate since the request that said so went, whole at its reset;
                # what it said stays past the reset, the least there is of it still, until the next response says more.
                left = remaining + rate * (now - at)
                if reset > now and left < costs[kind]:
                    return min(reset - now, (costs[kind] - left) / rate)
                continue
            if reset <= now and kind in self._probing:  # no response said what is left: it goes unheld
                del self._limits[kind]
                self._probing.discard(kind)
                continue
            if reset <= now:
                # Past its reset, one request goes first to learn what is left: requests sent after the response
                # that told the reset may still count, and a window may free one request at a time.
                remaining, reset, at = self._limits[kind] = (costs[kind], now + PROBE_WAIT, now)
                self._probing.add(kind)
            if remaining < costs[kind]:
                return reset - now
        self._calm = self._heard and not self._limits and not self._rates and self._concurrency >= self.ceiling
        return 0.0 if self._in_flight < self._concurrency else 1.0

    def _spare(self, kind: str, cost: int) -> bool:
        """Whether what the provider last said is left of a limit, less what went since, covers this cost and a
        second's refill besides: a token bucket fuller than a window's share of the minute (Anthropic's, which
        refills up to the minute's figure) is spent at once down to that share, and spread at the rate from there."""
        told = self._limits.get(kind)
        return told is not None and told[0] - cost >= self._rates[kind]

    def release(self, ticket: Ticket, status: int | None, headers: Mapping[str, str]) -> None:
        """An attempt is over: its response's status and headers (None when it got none) say what is left."""
        # What most responses of most agents say of their limits is nothing: then no clock is read for it.
        found = {} if status is None or REMAINING.isdisjoint(headers) else allowances(headers, time.time())
        with self._lock:
            self._release(ticket, status, headers, found)

    def _release(
        self, ticket: Ticket, status: int | None, headers: Mapping[str, str], found: dict[str, Allowance]
    ) -> None:
        self._in_flight -= 1
        self._heard = True
        number, tokens_sent, went = ticket
        if found and number > self._latest:
            self._latest = number
            at = time.monotonic()
            later = self._sent - number, self._tokens_sent - tokens_sent  # sent since: not counted
            self._rates.update(rates(headers))
            for kind, allowance in found.items():
                if allowance.reset is not None:
                    spent = later[0] if kind == "requests" else later[1]
                    self._limits[kind] = (allowance.remaining - spent, at + allowance.reset, went)
                    self._probing.discard(kind)
            self._calm = False
            self._told = True
        if status is not None and 200 <= status < 300 and self._concurrency < self.ceiling:
            self._successes += 1
            if self._successes >= self._concurrency:  # one more at a time for each round that went well
                self._concurrency += 1
                self._successes = 0
        if self._waiting:
            self._turn.notify_all()

    def limited(self, ticket: Ticket, wait: float | None, headers: Mapping[str, str]) -> None:
        """A 429 ends an attempt: no request goes for `wait` seconds (when the provider said), and the concurrency
        halves, once for the attempts in flight when it first did; held before any request waiting hears of it."""
        found = allowances(headers, time.time())
        with self._lock:
            self._limited += 1
            self._calm, self._told = False, True
            if wait is not None:
                self._held_until = max(self._held_until, time.monotonic() + wait)
            if ticket[0] > self._cut_at:
                self._concurrency = max(1, min(self._concurrency, self.ceiling, self._in_flight) // 2)
                self._successes = 0
                self._cut_at = self._sent
            self._release(ticket, 429, headers, found)

    def state(self) -> Pacing:
        """How the endpoint is paced now, and what pacing it took so far."""
        with self._lock:
            now = time.monotonic()
            requests = self._limits.get("requests")
            requests = requests if requests and requests[1] > now else None  # past its reset: whole again
            held = max(self._held_until - now, requests[1] - now if requests and requests[0] <= 0 else 0.0)
            return Pacing(
                ceiling=self.ceiling,
                concurrency=min(self._concurrency, self.ceiling),
                peak=self._peak,
                limited=self._limited,
                waited_ms=self._waited * 1000,
                requests_left=max(0, requests[0]) if requests else None,
                resets_in=requests[1] - now if requests else None,
                held_for=max(0.0, held),
                paced=not self._calm,
                told=self._told,
            )


def _costs(cost: tuple[int, int]) -> dict[str, int]:
    """What an attempt of these (input, output) tokens takes of each limit."""
    return {"requests": 1, "tokens": cost[0] + cost[1], "input-tokens": cost[0], "output-tokens": cost[1]}
