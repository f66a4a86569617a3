"""An environment that does everything an environment must not be able to harm the harness with."""

from __future__ import annotations

import os
import sys
import time


class Hostile:
    """Each method misbehaves in its own way."""

    def hang(self) -> None:
        """Never answers (first starts a process of its own and writes both pids, for a test that looks for orphans)."""
        pid_file = os.environ.get("HOSTILE_PID_FILE")
        if pid_file:
            child = self.spawn()
            with open(pid_file, "w", encoding="utf-8") as f:
                f.write(f"{os.getpid()} {child}")
        print("about to hang", file=sys.stderr, flush=True)
        time.sleep(3600)

    def leave(self) -> None:
        """Exits at once, without a word."""
        print("leaving now", file=sys.stderr, flush=True)
        os._exit(3)

    def mutter(self) -> None:
        """Prints to stdout, without a flush, and exits."""
        print("last words")
        os._exit(4)

    def crash(self) -> None:
        """Dies by a signal."""
        import signal

        os.kill(os.getpid(), signal.SIGKILL)

    def shout(self) -> str:
        """Prints megabytes."""
        for _ in range(64):
            print("x" * 65536)
        return "done"

    def odd(self) -> object:
        """Returns what is not JSON."""
        return {1, 2, 3}

    def refuse(self, reason: str = "no") -> None:
        """Raises, as a real tool answers a bad call."""
        raise ValueError(reason)

    def ping(self) -> str:
        """Answers."""
        return "pong"

    def spawn(self) -> int:
        """Starts a process of its own, which would outlive the worker, and answers its pid."""
        import subprocess

        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid

    def deep(self) -> list[object]:
        """Returns JSON nested deeper than any tool's answer, deep enough to exhaust a recursion over it."""
        nested: list[object] = []
        for _ in range(600):
            nested = [nested]
        return nested

    def scribble(self) -> str:
        """Writes a line that is not JSON to every pipe it holds beyond the standard three: the answers' among them."""
        import stat

        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, b"not json\n")
            except OSError:
                pass
        return "done"


class DeepState:
    """An environment whose state is nested too deeply to be judged."""

    def ping(self) -> str:
        """Answers."""
        return "pong"

    def state(self) -> dict[str, object]:
        """Nested 600 levels deep."""
        nested: dict[str, object] = {}
        for _ in range(600):
            nested = {"a": nested}
        return nested
