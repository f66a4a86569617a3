"""The smallest agent the harness can judge: POST /run takes a prompt and answers with a tool call, a refusal or text.

    python3 examples/http_agent.py 8000 &
    EVAL_AGENT_URL=http://127.0.0.1:8000/run python3 eval_agent.py

Start from here: answer() is where your agent runs its model and reports the calls it made.
"""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def answer(prompt: str) -> dict[str, Any]:
    """The reply to one prompt; a keyword rule stands in for a model here."""
    if re.search(r"password|api key|access token", prompt, re.IGNORECASE):
        return {"refused": True, "text": "I can't share credentials."}
    asset = re.search(r"\bast_\w+", prompt)
    if asset:
        return {"toolCall": {"name": "imageman.asset.get", "args": {"assetId": asset[0]}}}
    return {"toolCall": None, "text": "I can only look assets up by their id."}


class Agent(BaseHTTPRequestHandler):
    """POST /run: the request's prompt in, the reply out as JSON."""

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(answer(request["prompt"])).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8000), Agent)
    print(f"listening on http://127.0.0.1:{server.server_port}/run", flush=True)
    server.serve_forever()
