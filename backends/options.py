"""Settings several backends share, and how the backends that send a request body read the fields added to it."""

from __future__ import annotations

from typing import Any

from harness.endpoints import headers
from harness.records import ConfigError
from harness.settings import Setting, number, read_json

RESERVED_BODY_KEYS = ("prompt", "taskId", "runId")


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
    "EVAL_TIMEOUT",
    "--timeout",
    "the longest one request may take, all of it, in seconds",
    number(float, 0.001, 3600.0),
    60.0,
    "SECONDS",
    shown="60",
)
RETRIES = Setting(
    "EVAL_RETRIES",
    "--retries",
    "retries after the first attempt of a connection error, timeout, 429, 502, 503, 504",
    number(int, 0, 10),
    2,
    "N",
)
MAX_RESPONSE_BYTES = Setting(
    "EVAL_MAX_RESPONSE_BYTES",
    "--max-response-bytes",
    "the largest reply read, in bytes",
    number(int, 1, 2**40),
    10 * 1024 * 1024,
    "N",
)
HEADERS = Setting("EVAL_AGENT_HEADERS", None, "a JSON object of extra request headers", headers, {}, secret=True)
REQUEST_FIELDS = Setting(
    "EVAL_AGENT_BODY", "--agent-body", "a JSON object merged into every request body", request_fields, {}, "JSON"
)
