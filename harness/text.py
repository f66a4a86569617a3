"""Name a decoded JSON value's kind for error messages."""

from __future__ import annotations

import json
from typing import Any

KINDS = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object", type(None): "null"}


def kind(value: Any) -> str:
    """`the string "abc"`, `a list`, `null`...: what a message says it got."""
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return "an empty string" if not value.strip() else f"the string {json.dumps(shown)}"
    return KINDS.get(type(value), type(value).__name__)
