"""The results file: the results document as JSON, the source of truth every other report is rendered from."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from harness.records import Outputs, Summary
from harness.results import render_json

if TYPE_CHECKING:
    from harness.comparison import Comparison


def render(
    document: Mapping[str, Any], summary: Summary, outputs: Outputs, comparison: Comparison | None
) -> Iterator[str]:
    """The document, in pieces as its entries stream by."""
    return render_json(document)
