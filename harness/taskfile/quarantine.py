"""A task's quarantine (`quarantine`): out of the gate until a date, for a reason, with where its fix is tracked."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from harness.records import Quarantine, Task
from harness.taskfile.context import Context
from harness.text import count, kind

QUARANTINE_KEYS = ("until", "reason", "issue")
SHAPE = '{"until": "YYYY-MM-DD", "reason": TEXT, "issue": URL_OR_ID}'
ISO_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"
# A quarantine this many days from its end is said by validate and a run: time to fix the task, or to extend it.
ENDING_SOON_DAYS = 7


def quarantine(context: Context, value: Any, path: str) -> Quarantine | None:
    """The quarantine at path, or None and the problems."""
    if not isinstance(value, dict):
        context.problem(path, f"expected {SHAPE}, got {kind(value)}")
        return None
    problems = len(context.problems)
    context.unknown_keys(value, QUARANTINE_KEYS, path)
    until = value.get("until")
    if "until" not in value:
        context.problem(f"{path}.until", "missing: expected the date it ends, YYYY-MM-DD (UTC)")
    elif not isinstance(until, str):
        context.problem(f"{path}.until", f"expected a date, YYYY-MM-DD (UTC), got {kind(until)}")
    elif not is_date(until):
        context.problem(f"{path}.until", f"expected a date, YYYY-MM-DD (UTC), got {json.dumps(until)}")
    reason = context.text(value, "reason", path)
    issue = value.get("issue")
    if issue is not None and (not isinstance(issue, str) or not issue.strip()):
        context.problem(f"{path}.issue", f"expected a URL or an id as a non-empty string, got {kind(issue)}")
    if len(context.problems) != problems or not isinstance(until, str) or reason is None:
        return None
    return Quarantine(until, reason, issue)


def is_date(text: str) -> bool:
    """Whether text is a day of the calendar written as YYYY-MM-DD (2027-02-30 is not)."""
    from datetime import date  # only a task file with a quarantine pays for it

    if not re.match(ISO_DATE, text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def quarantine_warnings(tasks: Iterable[Task], today: str) -> list[str]:
    """What validate and a run say of the quarantines on today (UTC): one ending within ENDING_SOON_DAYS, one over."""
    quarantined = [(task.id, task.quarantine) for task in tasks if task.quarantine is not None]
    if not quarantined:  # a file without a quarantine imports nothing for it
        return []
    from datetime import date

    warnings = []
    for task_id, held in quarantined:
        left = (date.fromisoformat(held.until) - date.fromisoformat(today)).days
        if left <= 0:
            warnings.append(
                f"quarantine of {task_id} ended on {held.until}: the task counts for the gate again; take the"
                " quarantine out of the task file"
            )
        elif left <= ENDING_SOON_DAYS:
            warnings.append(
                f"quarantine of {task_id} ends on {held.until}, in {count(left, 'day')}: fix it or extend it"
            )
    return warnings
