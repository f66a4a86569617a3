"""The engine of the agent eval harness: task file, selection, running, scoring, verdict, results, reporters."""

__version__ = "0.4.0"
