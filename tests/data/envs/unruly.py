"""Environments that write where a careless tool writes: each counts its touches, and its state is the count."""

from __future__ import annotations

import os
import stat
import sys


class Printer:
    """Prints in a tool call, as a debugging user does."""

    def __init__(self) -> None:
        self.touched = 0

    def touch(self) -> str:
        """Prints a line that looks like an answer, and counts."""
        print('{"result": "printed"}')
        self.touched += 1
        return "touched"


class Writer:
    """Writes to file descriptor 1 itself, under print and sys.stdout."""

    def __init__(self) -> None:
        self.touched = 0

    def touch(self) -> str:
        """Writes a line that looks like an answer to fd 1, and counts."""
        os.write(1, b'{"result": "written"}\n')
        self.touched += 1
        return "touched"


class Reader:
    """Reads its standard input, as a tool that asks for confirmation does."""

    def __init__(self) -> None:
        self.touched = 0

    def touch(self) -> str:
        """Reads a line of stdin (none), and counts."""
        sys.stdin.readline()
        self.touched += 1
        return "touched"


class Forker:
    """Forks a child that writes a line and, forgetting to exit, returns as the parent does."""

    def __init__(self) -> None:
        self.touched = 0

    def touch(self) -> str:
        """Forks: the child returns at once, the parent once the child has ended."""
        child = os.fork()
        if child == 0:
            print("the child writes")
            return "the child's"
        os.waitpid(child, 0)
        self.touched += 1
        return "touched"


class Forger:
    """Writes a line that looks like an answer to every pipe it holds beyond the standard three."""

    def __init__(self) -> None:
        self.touched = 0

    def touch(self) -> str:
        """Writes to the pipes, and counts."""
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, b'{"result": "forged"}\n')
            except OSError:
                pass
        self.touched += 1
        return "touched"


class Slotted:
    """Keeps its count in a slot, and has no state()."""

    __slots__ = ("touched",)

    def __init__(self) -> None:
        self.touched = 0

    def touch(self) -> str:
        """Counts."""
        self.touched += 1
        return "touched"


class BadState:
    """Its state() raises."""

    def touch(self) -> str:
        """Answers."""
        return "touched"

    def state(self) -> dict[str, object]:
        """Raises, as a state() with a bug does."""
        raise KeyError("files")
