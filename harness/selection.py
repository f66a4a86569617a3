"""Choose the tasks to run: glob filters over ids and categories, then a deterministic shard."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from harness.records import ConfigError, Task


def select_tasks(tasks: Sequence[Task], task_globs: Sequence[str], category_globs: Sequence[str]) -> tuple[Task, ...]:
    """The tasks whose id matches a --task glob and whose category matches a --category glob (absent: any)."""
    for flag, globs, values in (
        ("--task", task_globs, [t.id for t in tasks]),
        ("--category", category_globs, [t.category for t in tasks]),
    ):
        for glob in globs:
            if not any(fnmatchcase(value, glob) for value in values):
                raise ConfigError(f"{flag} {glob!r} matches no task {'id' if flag == '--task' else 'category'}")
    selected = tuple(
        task
        for task in tasks
        if (not task_globs or any(fnmatchcase(task.id, glob) for glob in task_globs))
        and (not category_globs or any(fnmatchcase(task.category, glob) for glob in category_globs))
    )
    if not selected:
        raise ConfigError("--task and --category together select no task")
    return selected


def shard_of(tasks: Sequence[Task], index: int, count: int) -> tuple[Task, ...]:
    """Every count-th task from the index-th (1-based): balanced, and the same on every machine."""
    shard = tuple(tasks[index - 1 :: count])
    if not shard:
        raise ConfigError(
            f"--shard {index}/{count}: {len(tasks)} selected {'task leaves' if len(tasks) == 1 else 'tasks leave'} "
            f"this shard empty; use at most {len(tasks)} shard{'' if len(tasks) == 1 else 's'}"
        )
    return shard
