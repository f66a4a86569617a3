"""An OpenAI Agents SDK agent behind POST /run whose tools are the ones the harness serves it over MCP: the request's
`toolServer.url`, connected with the SDK's own MCP client for the request (see docs/worlds.md).

    OPENAI_API_KEY=sk-... python3 examples/frameworks/openai_agents_mcp.py gpt-5.5 8000 &
    EVAL_TOOL_NAMES=safe EVAL_AGENT_URL=http://127.0.0.1:8000/run \
        python3 eval_agent.py --tasks examples/worlds/eval-tasks.json

What the agent does to the task's world is what the harness judges, from the calls it answered itself; the reply still
says which calls the agent made, as any reply does. EVAL_TOOL_NAMES=safe has the tools offered under the names OpenAI
takes (`fs_share` for `fs.share`). A request with no `toolServer` (a task whose tools the harness does not play) runs
the agent with no tools. A request with `modelProxy` (a run with --model-proxy) has the agent's model calls go through
the harness's proxy, which records them, or answers them from a cassette on --replay (see docs/recording.md).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents import Agent, ModelRefusalError, OpenAIChatCompletionsModel, Runner, ToolCallItem, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

INSTRUCTIONS = "You manage the user's files with the tools you have; ask nothing, do what is asked."
RUN_TIMEOUT = 60  # seconds a request may take, the model's turns and the tools' included


def conversation(request: dict[str, Any]) -> list[dict[str, Any]] | str:
    """The SDK's input: the conversation so far (a later turn's `messages`), or the prompt."""
    if "messages" not in request:
        return request["prompt"]
    return [{"role": m["role"], "content": m.get("content") or ""} for m in request["messages"]]


def calls_made(items: list[Any]) -> list[dict[str, Any]]:
    """The tool calls of a run's new items, as the harness's contract reports them."""
    made = []
    for item in items:
        if isinstance(item, ToolCallItem):
            raw = item.raw_item
            made.append({"name": raw.name, "args": json.loads(raw.arguments or "{}")})
    return made


class Adapter:
    """The agent's model client and the event loop it runs on, shared by every request; the tools are each
    request's."""

    def __init__(self, client: AsyncOpenAI, model: str) -> None:
        self.client = client
        self.model = OpenAIChatCompletionsModel(model=model, openai_client=client)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and reply for one request: the calls the agent made, and its last words, its refusal, or what
        went wrong."""
        served = request.get("toolServer")
        try:
            if served is None:
                result = await self.run(request, [])
            else:
                # A new endpoint each turn: connected for this request only, its tools listed afresh.
                async with MCPServerStreamableHttp(params={"url": served["url"]}, name="eval") as tools:
                    result = await self.run(request, [tools])
        except ModelRefusalError as refusal:
            return 200, {"toolCalls": [], "refused": True, "text": refusal.refusal}
        except Exception as error:  # the agent failed: say so, never as if it had answered
            return 500, {"error": f"{type(error).__name__}: {error}"}
        return 200, {"toolCalls": calls_made(result.new_items), "text": result.final_output or ""}

    async def run(self, request: dict[str, Any], servers: list[MCPServerStreamableHttp]) -> Any:
        proxy = request.get("modelProxy")
        if proxy is None:
            return await self.run_with(self.model, request, servers)
        # The one line an agent needs in eval mode: its model client pointed at the trial's base URL on the proxy.
        async with AsyncOpenAI(base_url=proxy["baseUrl"], api_key=self.client.api_key) as client:
            model = OpenAIChatCompletionsModel(model=self.model.model, openai_client=client)
            return await self.run_with(model, request, servers)

    async def run_with(
        self, model: OpenAIChatCompletionsModel, request: dict[str, Any], servers: list[MCPServerStreamableHttp]
    ) -> Any:
        agent = Agent(name="files", instructions=INSTRUCTIONS, model=model, mcp_servers=servers)
        return await asyncio.wait_for(Runner.run(agent, conversation(request)), RUN_TIMEOUT)

    def reply(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return asyncio.run_coroutine_threadsafe(self.answer(request), self.loop).result()

    def close(self) -> None:
        """Close the model's client (its kept-alive connections), then the event loop."""
        asyncio.run_coroutine_threadsafe(self.client.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def serve(adapter: Adapter, port: int = 0) -> ThreadingHTTPServer:
    """A server on 127.0.0.1 answering POST /run with the adapter's reply (not yet serving: call serve_forever)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            status, reply = adapter.reply(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the harness reports every request."""

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def main(argv: list[str]) -> None:
    model_name, port = argv[0], int(argv[1]) if len(argv) > 1 else 8000
    set_tracing_disabled(True)  # traces would go to OpenAI's platform
    server = serve(Adapter(AsyncOpenAI(), model_name), port)
    print(f"listening on http://127.0.0.1:{server.server_port}/run", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
