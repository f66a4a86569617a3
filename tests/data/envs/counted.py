"""A file system that notes in a file each time its state is read, for the test that a trial reads it only when a
check needs it."""

from __future__ import annotations


class CountedFiles:
    """Files by path; each state() read adds a line to the file named `log`."""

    def __init__(self, log: str) -> None:
        self.log = log
        self.files: dict[str, str] = {}

    def write(self, path: str, text: str) -> str:
        """Write a file."""
        self.files[path] = text
        return "ok"

    def state(self) -> dict[str, object]:
        """The files, by path, noted as read."""
        with open(self.log, "a", encoding="utf-8") as f:
            f.write("state\n")
        return {"files": self.files}
