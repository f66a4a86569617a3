"""An environment without a state() method: its state is its public attributes."""

from __future__ import annotations

import os


class Counter:
    """Counts what it is given."""

    def __init__(self, start: int = 0) -> None:
        self.count = start
        self.history: list[int] = []
        self._hidden = "not part of the state"

    def add(self, amount: int) -> int:
        """Add to the count; the new count."""
        self.history.append(amount)
        self.count += amount
        return self.count

    def variable(self, name: str) -> str | None:
        """A variable of the worker's environment (for the test that the harness's secrets stay out of it)."""
        return os.environ.get(name)
