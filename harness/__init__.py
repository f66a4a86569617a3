"""The engine of the agent eval harness: task file, selection, running, scoring, verdict, results, reporters."""

__version__ = "0.4.0"
__commit__: str | None = None  # the commit a single-file build (dist/eval_agent.pyz) was made from: the build sets it
