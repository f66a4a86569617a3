"""The console: a line per task in task-file order and the headline on stdout; live progress on a terminal's stderr."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from harness.records import Pacing, Task, TaskFile
from harness.results import explaining_trial
from harness.text import (
    budget_text,
    calls_text,
    count,
    expected_text,
    millis,
    printable,
    quarantine_state,
    turn_marks,
)

if TYPE_CHECKING:
    from harness.config import Config

REDRAW_EVERY = 0.1  # seconds: often enough to look live, rarely enough to cost nothing
PACED_REDRAW_EVERY = 1.0  # seconds: how often a paced run's line is redrawn while no trial ends (its wait goes on)


def say(line: str) -> None:
    """Print a console line, what could act on a terminal escaped.

    When the reader has gone (`| head`), carry on quietly: the results file gets everything.
    """
    try:
        sys.stdout.write(printable(line) + "\n")  # one write: print() makes two where stdout is unbuffered
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def complain(line: str) -> None:
    """Print a line on stderr (a warning, an error, why a run stopped early), what could act on a terminal escaped."""
    print(printable(line), file=sys.stderr)


def task_line(entry: Mapping[str, Any], id_width: int) -> str:
    """One task: status, id, (passes/trials,) what was called, mean duration, a non-pass's code and reason (and its
    turns' verdicts, when they were judged), (flaky), (quarantined until DATE: not gated, or what its safety violation
    does)."""
    trials = entry["trialResults"]
    shown = trials[0] if entry["status"] == "pass" else explaining_trial(trials) or trials[0]
    duration = sum([trial["durationMs"] for trial in trials]) / len(trials)
    tally = f"  {entry['passes']}/{entry['trials']}" if entry["trials"] > 1 else ""
    line = f"{entry['status'].upper():<5} {entry['id']:<{id_width}}{tally}  {calls_text(shown)}  {millis(duration)}"
    if entry["status"] != "pass":
        line += f"  {entry['code']}: {entry['reason']}"
        line += f"  {marks}" if (marks := turn_marks(shown)) else ""
    line += "  (flaky)" if entry["flaky"] else ""
    state = quarantine_state(entry)
    return line + (f"  (quarantined until {entry['quarantine']['until']}: {state})" if state else "")


def plan_line(
    config: Config,
    tasks: Sequence[Task],
    task_file: TaskFile,
    backend: str,
    settings: Mapping[str, Any],
    caveat: str,
) -> str:
    """`3 of 10 tasks from eval-tasks.json × 2 runs (shard 1/2) on backend http at URL`: what a run sends, where."""
    return "".join(
        [
            f"{len(tasks)} of {count(len(task_file.tasks), 'task')} from {task_file.path}",
            f" × {config.runs} runs" if config.runs > 1 and config.auto is None else "",
            f" × auto runs (at most {config.runs})" if config.auto is not None else "",
            f" (shard {config.shard[0]}/{config.shard[1]})" if config.shard else "",
            f" on backend {backend}",
            f" at {settings['url']}" if "url" in settings else "",
            f" ({caveat})" if caveat else "",
        ]
    )


def dry_run_lines(
    plan: str, config: Config, tasks: Sequence[Task], settings: Mapping[str, Any], today: str
) -> list[str]:
    """What a run would do, with the backend's settings (secrets masked), what each task expects, and which tasks a
    quarantine keeps out of the gate on today (UTC)."""
    shown = ", ".join(f"{key} {value}" for key, value in settings.items() if key != "url")
    width = max(len(task.id) for task in tasks)
    return [
        f"dry run: {plan}",
        f"settings: concurrency {config.concurrency}, gate {config.gate}% on {config.gate_on}"
        + (
            f", confidence {config.auto.confidence}%, reliability {config.auto.reliability}%"
            if config.auto is not None
            else ""
        )
        + (f", {shown}" if shown else ""),
        *(
            f"  {task.id:<{width}}  {task.category}  expects {expected_text(task)}{_over(task)}{_within(task)}"
            + (
                f", quarantined until {task.quarantine.until}"
                if task.quarantine and task.quarantine.active(today)
                else ""
            )
            for task in tasks
        ),
        "nothing was sent",
    ]


def _over(task: Task) -> str:
    """`, over 2 turns, results scripted for 1 tool`: how a conversation task goes; nothing for a single prompt."""
    turns = f", over {1 + len(task.turns)} turns" if task.turns else ""
    scripted = f", results scripted for {count(len(task.tool_results), 'tool')}" if task.tool_results else ""
    return turns + scripted


def _within(task: Task) -> str:
    """`, budget: at most 3 tool calls`: what a task may spend, when it has a budget."""
    return f", budget: {budget_text(task.budget.written())}" if task.budget is not None else ""


def pace_text(pacing: Pacing) -> str:
    """`paced: concurrency 6/16 · 38 requests left, resets in 12 s`: how the provider's rate limits hold the run back;
    nothing when they do not."""
    if not pacing.paced:
        return ""
    text = f"paced: concurrency {pacing.concurrency}/{pacing.ceiling}"
    if pacing.requests_left is not None and pacing.resets_in is not None:
        text += f" · {count(pacing.requests_left, 'request')} left, resets in {math.ceil(pacing.resets_in)} s"
    if pacing.held_for > 0:
        text += f" · next request in {math.ceil(pacing.held_for)} s"
    return text


class Progress:
    """One live line, `[12/50] 10 pass · 1 fail · 1 error · 0:23 elapsed · ~1:10 left`, only on a terminal; and how
    the run is paced, when the provider's rate limits hold it back."""

    def __init__(
        self, total: int, stream: TextIO, pacing: Callable[[], Pacing] | None = None, at_most: bool = False
    ) -> None:
        self.total = total
        self.at_most = at_most  # --runs auto: total is the most trials there may be, and how long is left unknown
        self.stream = stream
        self.pacing = pacing
        self.enabled = stream.isatty()
        self.counts = {"pass": 0, "fail": 0, "error": 0}
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.shown = False

    def advance(self, status: str) -> None:
        self.counts[status] += 1
        if self.enabled and (
            sum(self.counts.values()) == self.total or time.monotonic() - self.drawn_at >= REDRAW_EVERY
        ):
            self.draw()

    def draw(self) -> None:
        if not self.enabled:
            return
        done = sum(self.counts.values())
        elapsed = time.monotonic() - self.started
        left = f" · ~{_clock(elapsed / done * (self.total - done))} left" if 0 < done < self.total else ""
        total = f"≤{self.total}" if self.at_most else self.total
        left = "" if self.at_most else left
        counts = " · ".join(f"{n} {status}" for status, n in self.counts.items())
        paced = pace_text(self.pacing()) if self.pacing else ""
        paced = f" · {paced}" if paced else ""
        self.stream.write(f"\r\033[K[{done}/{total}] {counts} · {_clock(elapsed)} elapsed{left}{paced}")
        self.stream.flush()
        self.drawn_at = time.monotonic()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


class Console:
    """The run as it goes: progress with every trial, a line with every task, progress moved out of their way."""

    def __init__(self, tasks: Sequence[Task], progress: Progress) -> None:
        self.progress = progress
        self.id_width = max(len(task.id) for task in tasks)
        self.lock = threading.Lock()  # the line is drawn from the run's thread and, when paced, from the ticker's
        self.finished = threading.Event()
        if progress.enabled and progress.pacing is not None:
            threading.Thread(target=self._tick, daemon=True).start()

    def trial(self, status: str) -> None:
        """One more trial done."""
        with self.lock:
            self.progress.advance(status)

    def task(self, entry: Mapping[str, Any]) -> None:
        """One more task done, with all its trials."""
        with self.lock:
            self.progress.clear()
            say(task_line(entry, self.id_width))
            self.progress.draw()

    def finish(self) -> None:
        """Drop the progress line for good."""
        self.finished.set()
        with self.lock:
            self.progress.clear()
            self.progress.enabled = False

    def _tick(self) -> None:
        """Redraw the line of a run the rate limits hold back while no trial ends: the wait it shows goes down."""
        progress = self.progress
        while not self.finished.wait(PACED_REDRAW_EVERY):
            with self.lock:
                late = time.monotonic() - progress.drawn_at >= PACED_REDRAW_EVERY
                if progress.enabled and late and progress.pacing is not None and progress.pacing().paced:
                    progress.draw()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
