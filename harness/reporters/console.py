"""The console: a line per task in task-file order on stdout, and a live progress line on a terminal's stderr."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from harness.records import Result, Task, TaskResult
from harness.results import result_line

REDRAW_EVERY = 0.1  # seconds: often enough to look live, rarely enough to cost nothing


def say(line: str) -> None:
    """Print a console line; when the reader has gone (`| head`), carry on quietly: the results file gets everything."""
    try:
        sys.stdout.write(line + "\n")  # one write: print() makes two where stdout is unbuffered
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class Progress:
    """One live line, `[12/50] 10 pass · 1 fail · 1 error · 0:23 elapsed · ~1:10 left`, only where stream is a terminal."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.enabled = stream.isatty()
        self.counts = {"pass": 0, "fail": 0, "error": 0}
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.shown = False

    def advance(self, status: str) -> None:
        self.counts[status] += 1
        done = sum(self.counts.values())
        if self.enabled and (done == self.total or time.monotonic() - self.drawn_at >= REDRAW_EVERY):
            self.draw()

    def draw(self) -> None:
        if not self.enabled:
            return
        done = sum(self.counts.values())
        elapsed = time.monotonic() - self.started
        left = f" · ~{_clock(elapsed / done * (self.total - done))} left" if 0 < done < self.total else ""
        counts = " · ".join(f"{n} {status}" for status, n in self.counts.items())
        self.stream.write(f"\r\033[K[{done}/{self.total}] {counts} · {_clock(elapsed)} elapsed{left}")
        self.stream.flush()
        self.drawn_at = time.monotonic()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


class Console:
    """Collects trials as they come and prints each task's line once all its trials are in, in task-file order."""

    def __init__(self, tasks: Sequence[Task], runs: int, progress: Progress) -> None:
        self.tasks = tasks
        self.runs = runs
        self.progress = progress
        self.id_width = max(len(task.id) for task in tasks)
        self.trials: dict[str, list[Result]] = {}
        self.printed = 0

    def say(self, line: str) -> None:
        """A line on stdout, with the progress line moved out of its way."""
        self.progress.clear()
        say(line)
        self.progress.draw()

    def on_result(self, result: Result) -> None:
        self.trials.setdefault(result.task.id, []).append(result)
        self.progress.advance(result.outcome.status)
        while self.printed < len(self.tasks) and len(self.trials.get(self.tasks[self.printed].id, ())) == self.runs:
            self.say(self._line(self.tasks[self.printed]))
            self.printed += 1

    def finish(self) -> None:
        """Print what a cut-short run left: tasks with some of their trials; then drop the progress line."""
        for task in self.tasks[self.printed :]:
            if task.id in self.trials:
                self.say(self._line(task))
        self.printed = len(self.tasks)
        self.progress.clear()
        self.progress.enabled = False

    def _line(self, task: Task) -> str:
        return result_line(TaskResult(task, tuple(self.trials[task.id])), self.id_width)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
