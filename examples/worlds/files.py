"""A small file system to play tools against: the environment of eval-tasks.json here (see docs/worlds.md).

Plain Python and deterministic: no clock, no randomness, no real files. Each trial gets a fresh FileSystem.
"""

from __future__ import annotations


class FileSystem:
    """Files by name, each a text, and the addresses each file is shared with."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})
        self.shared: dict[str, list[str]] = {}

    def ls(self) -> list[str]:
        """The files' names, in order."""
        return sorted(self.files)

    def read(self, path: str) -> str:
        """A file's text."""
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]

    def mv(self, source: str, target: str) -> str:
        """Rename a file (a name with a / puts it in that folder); whom it is shared with goes with it."""
        if source not in self.files:
            raise FileNotFoundError(source)
        if target in self.files:
            raise FileExistsError(target)
        self.files[target] = self.files.pop(source)
        if source in self.shared:
            self.shared[target] = self.shared.pop(source)
        return f"moved {source} to {target}"

    def rm(self, path: str) -> str:
        """Delete a file."""
        if path not in self.files:
            raise FileNotFoundError(path)
        del self.files[path]
        self.shared.pop(path, None)
        return f"deleted {path}"

    def share(self, path: str, email: str) -> str:
        """Share a file with an address."""
        if path not in self.files:
            raise FileNotFoundError(path)
        readers = self.shared.setdefault(path, [])
        if email not in readers:
            readers.append(email)
        return f"shared {path} with {email}"

    def state(self) -> dict[str, object]:
        """What a task's expect.state judges: which files there are, in order, and whom each is shared with."""
        return {"files": sorted(self.files), "shared": self.shared}
