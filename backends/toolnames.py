"""Tool names as providers accept them (^[a-zA-Z0-9_-]{1,64}$), mapped back for scoring through one table per run."""

from __future__ import annotations

from collections.abc import Iterable

from harness.records import ConfigError
from harness.text import provider_name

MAX_LENGTH = 64


class ToolNames:
    """Both directions of the mapping: `imageman.asset.search` <-> `imageman_asset_search`."""

    def __init__(self, names: Iterable[str]) -> None:
        self.to_provider: dict[str, str] = {}
        self.from_provider: dict[str, str] = {}
        for name in names:
            mapped = provider_name(name)
            if len(mapped) > MAX_LENGTH:
                raise ConfigError(
                    f"tools: {name!r} is {len(mapped)} characters long; "
                    f"providers take tool names of at most {MAX_LENGTH}"
                )
            if mapped in self.from_provider:
                raise ConfigError(
                    f"tools: {self.from_provider[mapped]!r} and {name!r} both become {mapped!r} for the provider; "
                    "rename one"
                )
            self.to_provider[name] = mapped
            self.from_provider[mapped] = name

    def provider(self, name: str) -> str:
        return self.to_provider[name]

    def original(self, name: str) -> str:
        """The task file's name for a name the model called; an unknown name (a tool it made up) stays as it is."""
        return self.from_provider.get(name, name)
