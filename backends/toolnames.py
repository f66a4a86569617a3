"""Tool names as providers accept them (^[a-zA-Z0-9_-]{1,64}$), mapped back for scoring through one table per run."""

from __future__ import annotations

from collections.abc import Iterable

from harness.text import provider_name


class ToolNames:
    """Both directions of the mapping: `imageman.asset.search` <-> `imageman_asset_search`. The task file's loader
    refuses two tools that map to one name, so the mapping goes back without doubt."""

    def __init__(self, names: Iterable[str]) -> None:
        self.to_provider = {name: provider_name(name) for name in names}
        self.from_provider = {mapped: name for name, mapped in self.to_provider.items()}

    def provider(self, name: str) -> str:
        return self.to_provider[name]

    def original(self, name: str) -> str:
        """The task file's name for a name the model called; an unknown name (a tool it made up) stays as it is."""
        return self.from_provider.get(name, name)
