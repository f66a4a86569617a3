"""Settings several backends share, and how the backends that send a request body read the fields added to it."""

from __future__ import annotations

from typing import Any

from harness.endpoints import headers
from harness.records import ConfigError
from harness.settings import Setting, number, read_json, switch

RESERVED_BODY_KEYS = ("prompt", "taskId", "runId", "trialId", "trial", "attempt")


def request_fields(text: str, where: str) -> dict[str, Any]:
    """A JSON object merged into every request body; it cannot set what the harness sends."""
    try:
        fields = read_json(text, where)
    except ValueError as exc:
        raise ConfigError(f"{where}: expected a JSON object, got invalid JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise ConfigError(f"{where}: expected a JSON object")
    for key in RESERVED_BODY_KEYS:
        if key in fields:
            raise ConfigError(f"{where}: cannot set {key!r}; the harness sends it")
    return fields


TIMEOUT = Setting(
    var="EVAL_TIMEOUT",
    flag="--timeout",
    help="the longest one request may take, all of it, in seconds",
    read=number(float, 0.001, 3600.0),
    default=60.0,
    metavar="SECONDS",
    shown="60",
)
RETRIES = Setting(
    var="EVAL_RETRIES",
    flag="--retries",
    help="retries after the first attempt of a connection error, timeout, 429, 502, 503, 504 (http: of what the agent "
    "may have started on, only with --retry-after-send); a 429 that says how long to wait spends none",
    read=number(int, 0, 10),
    default=2,
    metavar="N",
)
RETRY_AFTER_SEND = Setting(
    var="EVAL_RETRY_AFTER_SEND",
    flag="--retry-after-send",
    help="also retry a request the agent may have started on (a timeout, a reset, 502, 504, a 503 without "
    "Retry-After), as the next attempt of the same trialId",
    read=switch,
    default=False,
    shown="off; 1 is on",
    switch=True,
)
MAX_RESPONSE_BYTES = Setting(
    var="EVAL_MAX_RESPONSE_BYTES",
    flag="--max-response-bytes",
    help="the largest reply read, in bytes",
    read=number(int, 1, 2**40),
    default=10 * 1024 * 1024,
    metavar="N",
)
HEADERS = Setting(
    var="EVAL_AGENT_HEADERS",
    flag=None,
    help="a JSON object of extra request headers",
    read=headers,
    default={},
    secret=True,
)
REQUEST_FIELDS = Setting(
    var="EVAL_AGENT_BODY",
    flag="--agent-body",
    help="a JSON object merged into every request body",
    read=request_fields,
    default={},
    metavar="JSON",
)
