"""Reading a file the user names: a regular file only, and never more of it than its cap."""

from __future__ import annotations

import errno
import os
import stat

from harness.records import ConfigError


def read_capped(path: str, max_bytes: int) -> bytes:
    """The file's bytes, at most max_bytes + 1 of them (more than max_bytes: the file is over its cap).

    OSError when it cannot be read, or is not a regular file: /dev/zero never ends, a FIFO waits for a writer.
    """
    # Non-blocking, or opening a FIFO would wait for a writer; on a regular file the flag changes nothing.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as f:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        # What read() sets aside is the file's own size, not the cap, when the file says one.
        return f.read((min(info.st_size, max_bytes) if info.st_size else max_bytes) + 1)


def read_input(path: str, max_bytes: int, over: str, cannot: str = "cannot read") -> bytes:
    """The bytes of a file a run reads; ConfigError `PATH: <cannot>: <why>` when it cannot be read, `PATH: <over>`
    when it holds more than max_bytes."""
    try:
        raw = read_capped(path, max_bytes)
    except OSError as exc:
        raise ConfigError(f"{path}: {cannot}: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise ConfigError(f"{path}: {over}")
    return raw
