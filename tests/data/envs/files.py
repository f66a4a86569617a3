"""A small file system for the environment tests: files by path, a state() of its own."""

from __future__ import annotations


class FileSystem:
    """Files by path, each a text."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})

    def write(self, path: str, text: str) -> str:
        """Write a file, replacing what it held."""
        self.files[path] = text
        return f"wrote {len(text)} characters to {path}"

    def read(self, path: str) -> str:
        """A file's text."""
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    def remove(self, path: str) -> dict[str, object]:
        """Remove a file."""
        if path not in self.files:
            raise FileNotFoundError(path)
        del self.files[path]
        return {"removed": path, "left": len(self.files)}

    def state(self) -> dict[str, object]:
        """The files, by path."""
        return {"files": self.files}
