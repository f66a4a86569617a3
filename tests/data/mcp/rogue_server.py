"""A hand-written stdio MCP server for the cases the SDK will not produce. Usage: rogue_server.py MODE

paged: tools/list in three pages; garbage: a line that is not JSON; silent: never answers tools/list;
error: answers tools/list with a JSON-RPC error; exit: exits with code 3 right after initialize;
echo: a line that is not JSON, with the value of its --token option where a 200-character clip cuts it.
"""

import json
import sys
import time

mode = sys.argv[1]
PAGES = {None: ("a", "1"), "1": ("b", "2"), "2": ("c", None)}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue  # a notification, or the client's answer to our ping
    if message["method"] == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "rogue", "version": "0"},
                },
            }
        )
        if mode == "exit":
            sys.exit(3)
        continue
    if mode == "paged":
        # A request of the server's own first: a client must answer or ignore it, not take it for the reply.
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
        name, cursor = PAGES[(message.get("params") or {}).get("cursor")]
        result = {"tools": [{"name": name, "inputSchema": {"type": "object"}}]}
        if cursor:
            result["nextCursor"] = cursor
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})
    elif mode == "garbage":
        sys.stdout.write("Starting server on stdio... done\n")
        sys.stdout.flush()
    elif mode == "echo":
        sys.stdout.write("x" * 190 + sys.argv[sys.argv.index("--token") + 1] + " and more after it\n")
        sys.stdout.flush()
    elif mode == "silent":
        time.sleep(30)
    elif mode == "error":
        send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
