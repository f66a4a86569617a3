"""An agent whose model calls the run proxies (harness/serving/models.py): the proxy's record of a trial's calls is the
truth of its tokens, the agent's own account of them kept beside; and a trial none of whose calls reached the model is
an error, as an agent that could not be reached is.

Loaded only by a trial its run proxies the model calls of.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.records import ModelCall, Outcome

MODEL_UNREACHABLE = "model:unreachable"
MISS = "replay:miss"  # harness.cassette's
MODEL_PROXY = "EVAL_MODEL_PROXY"  # what a trial's path and its agent's key are masked as: the setting that proxies them


def costed(calls: Sequence[ModelCall]) -> list[ModelCall]:
    """The calls the upstream answered that cost tokens: every generation (chat, responses, messages, Gemini's), which
    must say them, and any other call that says some (a model list, a token count says none, and costs none)."""
    return [
        call
        for call in calls
        if call.error is None
        and 200 <= call.status < 300
        and (call.form != "other" or call.input_tokens is not None or call.output_tokens is not None)
    ]


def proxied_usage(calls: Sequence[ModelCall]) -> tuple[int, int] | None:
    """The (input, output) tokens of the calls the upstream answered, summed; None when one of them did not say its
    usage (the tokens are then not known), or none was answered."""
    answered = costed(calls)
    if not answered or any(call.input_tokens is None or call.output_tokens is None for call in answered):
        return None
    return sum(call.input_tokens or 0 for call in answered), sum(call.output_tokens or 0 for call in answered)


def unread(calls: Sequence[ModelCall]) -> str | None:
    """Why the trial's tokens are not known though the upstream answered its model calls: some did not say their usage
    (or said it in a way the proxy could not read); None when every answered call said its own."""
    answered = costed(calls)
    unsaid = sum(call.input_tokens is None or call.output_tokens is None for call in answered)
    if not unsaid:
        return None
    return f"the model proxy could not read the tokens of {unsaid} of the {len(answered)} model calls it answered"


def unreachable(calls: Sequence[ModelCall], upstream: str) -> Outcome | None:
    """The trial's error when the proxy could not reach the upstream for any of its calls and none got through."""
    failed = sum(call.error == "unreachable" for call in calls)
    if not failed or any(call.error is None for call in calls):
        return None
    made = f"{failed} model call{'' if failed == 1 else 's'}"
    return Outcome("error", MODEL_UNREACHABLE, f"the model proxy could not reach {upstream} ({made}, none got through)")


def missed(misses: Sequence[str]) -> Outcome | None:
    """The trial's error when a replay's cassette lacked one of its model calls: the first, and why."""
    if not misses:
        return None
    more = f" (and {len(misses) - 1} more)" if len(misses) > 1 else ""
    return Outcome("error", MISS, f"{misses[0]}{more}")
