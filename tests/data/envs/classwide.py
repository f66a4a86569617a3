"""A file system that keeps its files where Python code often does by mistake: in a class attribute, which every
instance made in one process shares."""

from __future__ import annotations

from typing import ClassVar


class SharedFiles:
    """Files by path, in a dict of the class's."""

    files: ClassVar[dict[str, str]] = {}  # the mistake: the instances share it

    def write(self, path: str, text: str) -> str:
        """Write a file."""
        self.files[path] = text
        return "ok"

    def state(self) -> dict[str, object]:
        """The files, by path."""
        return {"files": dict(self.files)}
