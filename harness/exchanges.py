"""The one seam every exchange with the agent or provider goes through, where a run's cassette records and replays.

`exchange(request, send, hidden)` is what the backends' wire code calls (backends/transport.py for every HTTP backend,
the command and the stub backends for theirs): `request` makes what the backend sends as the cassette keys it, `send`
makes the real exchange and returns what it gave as JSON. A run installs its tape (harness/cassette.py) once; with none
installed, exchange just sends (the request is not made, and the cassette's module never imported). The conversation
says where each exchange happens (at): the task, the trial, the turn, the step; and, for an agent that runs its own
tools, which tool server endpoint serves it (served_by); for one whose model calls the run proxies, which trial's path
on the proxy they come to (proxied_by).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from harness.leaks import NO_SECRETS, Secrets
from harness.records import record

if TYPE_CHECKING:
    from harness.serving.models import ProxiedTrial
    from harness.serving.tools import ServedTurn

# A recorded reply's fields as a backend reads them: each field's name, what it must be, and a test of that.
Fields = Mapping[str, tuple[str, Callable[[Any], bool]]]
TEXT = ("a string", lambda value: isinstance(value, str))
# A failure with no reply, as the command and the stub backends record it.
FAILURE: Fields = {"error": TEXT, "reason": TEXT}
# Which fields a recorded reply (an object) must have, by what it holds.
Shape = Callable[[Mapping[str, Any]], Fields]


def answer_or_failure(answer: Fields, failure: Fields = FAILURE) -> Shape:
    """The shape of a reply that is a failure's when it holds "error", else an answer's."""
    return lambda reply: failure if "error" in reply else answer


ANY_ANSWER = answer_or_failure({})


@record
class Place:
    """Where an exchange happens: the task, its trial (from 1), the user turn and the step in it (from 1)."""

    task: str
    trial: int
    turn: int
    step: int


class Recorder(Protocol):
    """What a run that records or replays installs here: harness/cassette.py's Tape."""

    replaying: bool

    def exchange(
        self, request: Mapping[str, Any], send: Callable[[], Any], hidden: Secrets, timed: bool, shape: Shape
    ) -> Any:
        """The reply to this request: the recorded one when replaying, else sent (and recorded)."""

    def latency_ms(self, task: str, trial: int) -> float:
        """The recorded latency of a trial's replayed exchanges, summed."""


class _Here(threading.local):
    """Each worker thread's place, and the seconds its requests were held before they were sent."""

    # Defaults read from the class: getattr with a default costs a caught AttributeError, twice a trial.
    place: Place | None = None
    held = 0.0
    proxied: ProxiedTrial | None = None


_HERE = _Here()
_TAPE: Recorder | None = None


def at(place: Place) -> None:
    """Say where the next exchange of this thread happens."""
    _HERE.place = place


def placed() -> Place | None:
    """Where this thread's next exchange happens, when the conversation said."""
    return _HERE.place


def served_by(endpoint: ServedTurn | None) -> None:
    """Say which tool server endpoint serves this thread's next exchange (None: none, from now on): the run's cassette
    records the calls it answers during the exchange with it, and a replay plays the recorded ones to it."""
    _HERE.endpoint = endpoint


def serving() -> ServedTurn | None:
    """The tool server endpoint that serves this thread's exchange, when the conversation said."""
    return getattr(_HERE, "endpoint", None)


def proxied_by(trial: ProxiedTrial | None) -> None:
    """Say which trial's path on the model proxy this thread's exchanges come with (None: none, from now on): what its
    agent sent the proxy (its key) and the path are secrets the run's cassette never writes."""
    _HERE.proxied = trial


def proxying() -> ProxiedTrial | None:
    """The trial's path on the model proxy that this thread's exchange comes with, when the run said."""
    return _HERE.proxied


def held(seconds: float) -> None:
    """This thread's request waited `seconds` before it was sent (the rate limits' hold, the run's first request):
    the harness's time, not the agent's, so neither its latency nor its trial's duration counts it."""
    _HERE.held += seconds


def held_so_far() -> float:
    """Seconds this thread's requests were held before they were sent, so far."""
    return _HERE.held


def install(tape: Recorder | None) -> None:
    """Make the tape the run's: every exchange from now goes through it."""
    global _TAPE
    _TAPE = tape


def installed() -> Recorder | None:
    """The run's tape, when it records or replays."""
    return _TAPE


def exchange(
    request: Callable[[], Mapping[str, Any]],
    send: Callable[[], Any],
    hidden: Secrets = NO_SECRETS,
    timed: bool = True,
    shape: Shape = ANY_ANSWER,
) -> Any:
    """What `send` gives for this request: from the run's tape when it holds it, else sent (and recorded when the tape
    records). request: makes {"path", "headers", "body"}, as much of it as the backend has, only when a tape is
    installed (a run with none has no use for it); timed: whether its latency counts (not for an agent answering inside
    this process); shape: the fields of what `send` gives, which a replayed reply must have."""
    tape = _TAPE
    return send() if tape is None else tape.exchange(request(), send, hidden, timed, shape)
