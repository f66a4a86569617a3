"""A command agent that runs its tools on those the harness serves it: the MCP SDK's client on EVAL_TOOL_SERVER_URL,
the calls of each turn read from a JSON file (its argument) by the conversation's first message."""

import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def made(url, calls):
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        for name, args in calls:
            await client.call_tool(name, args)


request = json.load(sys.stdin)
with open(sys.argv[1], encoding="utf-8") as f:
    decisions = json.load(f)
messages = request.get("messages")
calls = decisions[messages[0]["content"] if messages else request["prompt"]][request.get("turn", 1) - 1]
asyncio.run(asyncio.wait_for(made(os.environ["EVAL_TOOL_SERVER_URL"], calls), 30))
print(json.dumps({"toolCalls": [{"name": name, "args": args} for name, args in calls], "text": "Done."}))
