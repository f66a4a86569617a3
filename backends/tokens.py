"""The tokens a reply says it cost, checked where they enter, alike on every backend: a count is a whole number from 0
to 2^53, the most a report adds up exactly (the results file refuses more). Any other count makes the reply an error,
reply:bad-usage: a negative one would pass a token budget and a growth limit, and print a negative total."""

from __future__ import annotations

from typing import Any

from harness.leaks import NO_SECRETS, Secrets
from harness.records import BackendError
from harness.text import LARGEST, clip, kind

BAD_USAGE = "reply:bad-usage"


def token_count(value: Any, where: str, hidden: Secrets = NO_SECRETS) -> int:
    """The count as given; BackendError reply:bad-usage naming where it was when it is not one from 0 to 2^53."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    if whole and 0 <= value <= LARGEST:
        return value
    got = clip(str(value), 40) if whole else kind(hidden.mask_json(value))
    raise BackendError(BAD_USAGE, f"{where}: expected a whole number from 0 to 2^53, got {got}")
