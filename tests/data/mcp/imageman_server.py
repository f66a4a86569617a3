"""A real MCP server (the official SDK) with part of Imageman's surface, for the tests.

Usage: imageman_server.py [--http PORT] [--changed]
--changed serves the surface after a careless release: a renamed parameter, a newly required one, a tool gone.
"""

import sys
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

server = MCPServer("imageman")
changed = "--changed" in sys.argv

if changed:

    @server.tool(name="imageman.asset.get", description="Fetch one asset's metadata.")
    def asset_get(asset_id: str) -> str:
        return asset_id

    # A keyword the checkArgs "schema" checker does not read: validate says so for a task file that checks this tool.
    NotGif = Annotated[str, Field(json_schema_extra={"not": {"const": "gif"}})]

    @server.tool(name="imageman.transform.url", description="Build a CDN URL with transformations.")
    def transform_url(assetId: str, width: int, format: NotGif = "auto") -> str:
        return assetId

else:

    @server.tool(name="imageman.asset.get", description="Fetch one asset's metadata.")
    def asset_get(assetId: str, include: list[str] | None = None) -> str:
        return assetId

    @server.tool(name="imageman.transform.url", description="Build a CDN URL with transformations.")
    def transform_url(assetId: str, width: int | None = None, format: str = "auto") -> str:
        return assetId

    @server.tool(name="imageman.asset.tag", description="Add tags to assets.")
    def asset_tag(assetIds: list[str], tags: list[str]) -> str:
        return ",".join(tags)


if "--http" in sys.argv:
    port = int(sys.argv[sys.argv.index("--http") + 1])
    server.run("streamable-http", host="127.0.0.1", port=port)
else:
    server.run("stdio")
