"""The peers bench/rate_limits.py runs beside the harness (--peers): promptfoo (npm) and inspect-ai (PyPI), installed
in a folder of their own, never among the harness's requirements, and pointed at the rate-limited fake with their
documented settings:

  promptfoo   `promptfoo eval -j CEILING --no-cache`, its openai:chat provider with apiBaseUrl at the fake; its
              rate-limit handling is built in (retry-after, retry-after-ms and the remaining-requests headers, and
              fewer requests at once after a 429), with no setting to turn on
  inspect-ai  `inspect eval --model openai/fake-model --max-connections CEILING` with OPENAI_BASE_URL at the fake; 429s
              are retried with exponential backoff by Inspect

Each is given the same 1,000 prompts and scored as the harness scores them: the expected tool called, or none for a
task that expects a refusal. Neither is offered the tools' definitions (the fake answers with its call regardless, and
counts no tokens for them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

from ratelimited_provider import RateLimitedProvider

Runner = Callable[[RateLimitedProvider, str, str, int], tuple[float, int]]

INSPECT_TASK = """
import json, os
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, accuracy, scorer
from inspect_ai.solver import generate


@scorer(metrics=[accuracy()])
def called():
    async def score(state, target):
        names = [call.function for call in state.output.message.tool_calls or []]
        return Score(value=CORRECT if names == ([target.text] if target.text else []) else INCORRECT)
    return score


@task
def rate_limits():
    with open(os.environ["BENCH_SAMPLES"], encoding="utf-8") as f:
        samples = [Sample(input=s["prompt"], target=s["tool"], id=s["id"]) for s in json.load(f)]
    return Task(dataset=MemoryDataset(samples), solver=generate(tool_calls="none"), scorer=called())
"""


def samples(tasks: str) -> list[dict[str, str]]:
    """Each task's id, prompt and the provider name of the tool it expects ("" for a refusal)."""
    with open(tasks, encoding="utf-8") as f:
        document = json.load(f)
    return [
        {"id": t["id"], "prompt": t["prompt"], "tool": t["expect"].get("tool", "").replace(".", "_")}
        for t in document["tasks"]
    ]


def installed(argv: list[str], log: str) -> str:
    """'' when the install command ran, else why not (its last words)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]} could not run: {exc}"
    with open(log, "w", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)
    return "" if proc.returncode == 0 else f"{' '.join(argv[:3])} failed (exit {proc.returncode}), see {log}"


def timed(argv: list[str], env: dict[str, str], folder: str, ok: Callable[[int], bool]) -> float:
    """The wall time of the peer's run; RuntimeError with its last words when its exit code is not `ok`."""
    from rate_limits import timed as run_timed  # here: rate_limits imports this module

    return run_timed(argv, env, folder, ok)


def promptfoo(folder: str) -> tuple[Runner | None, str]:
    """promptfoo from the npm registry, under `folder`, or why not."""
    prefix = os.path.join(folder, "promptfoo")
    binary = os.path.join(prefix, "node_modules", ".bin", "promptfoo")
    if not os.path.exists(binary):
        os.makedirs(prefix, exist_ok=True)
        why = installed(["npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "promptfoo"], prefix + ".log")
        if why:
            return None, why
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    note = f"promptfoo {version[0] if version else '?'}; node {_version(['node', '--version'])}"

    def run(fake: RateLimitedProvider, tasks: str, where: str, ceiling: int) -> tuple[float, int]:
        from rate_limits import environment

        tests = [
            {
                "vars": {"prompt": s["prompt"]},
                "assert": [
                    {
                        "type": "javascript",
                        "value": f"JSON.stringify(output).includes({json.dumps(s['tool'])})"
                        if s["tool"]
                        else "typeof output === 'string'",
                    }
                ],
            }
            for s in samples(tasks)
        ]
        config = {
            "prompts": ["{{prompt}}"],
            "providers": [{"id": "openai:chat:fake-model", "config": {"apiBaseUrl": f"{fake.url}/v1"}}],
            "tests": tests,
        }
        path = os.path.join(where, "promptfooconfig.yaml")  # JSON is YAML
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        out = os.path.join(where, "out.json")
        env = environment(
            OPENAI_API_KEY="bench",
            PROMPTFOO_CONFIG_DIR=os.path.join(where, ".promptfoo"),
            PROMPTFOO_DISABLE_TELEMETRY="1",
            PROMPTFOO_DISABLE_UPDATE="1",
        )
        argv = [binary, "eval", "-c", path, "-j", str(ceiling), "--no-cache", "--no-progress-bar", "-o", out]
        wall = timed(argv, env, where, lambda code: code in (0, 100))  # 100: some tests failed
        with open(out, encoding="utf-8") as f:
            stats = json.load(f)["results"]["stats"]
        return wall, stats["failures"] + stats.get("errors", 0)

    return run, note


def inspect_ai(folder: str) -> tuple[Runner | None, str]:
    """inspect-ai from PyPI, in a virtualenv under `folder`, or why not."""
    venv = os.path.join(folder, "inspect")
    binary = os.path.join(venv, "bin", "inspect")
    if not os.path.exists(binary):
        why = installed([sys.executable, "-m", "venv", venv], venv + ".log") or installed(
            [os.path.join(venv, "bin", "pip"), "install", "-q", "inspect-ai", "openai"], venv + ".log"
        )
        if why:
            return None, why
    python = os.path.join(venv, "bin", "python")
    versions = _version([python, "-c", "import inspect_ai, openai; print(inspect_ai.__version__, openai.__version__)"])
    inspect_version, sdk_version = [*versions.split(), "?", "?"][:2]
    note = f"inspect-ai {inspect_version} (openai SDK {sdk_version})"

    def run(fake: RateLimitedProvider, tasks: str, where: str, ceiling: int) -> tuple[float, int]:
        from rate_limits import environment

        task = os.path.join(where, "rate_limits_task.py")
        with open(task, "w", encoding="utf-8") as f:
            f.write(INSPECT_TASK)
        data = os.path.join(where, "samples.json")
        with open(data, "w", encoding="utf-8") as f:
            json.dump(samples(tasks), f)
        logs = os.path.join(where, "logs")
        env = environment(
            OPENAI_API_KEY="bench", OPENAI_BASE_URL=f"{fake.url}/v1", BENCH_SAMPLES=data, INSPECT_DISPLAY="none"
        )
        argv = [
            binary,
            "eval",
            os.path.basename(task),
            "--model",
            "openai/fake-model",
            "--max-connections",
            str(ceiling),
        ]
        argv += ["--no-fail-on-error", "--log-format", "json", "--log-dir", logs, "-M", "responses_api=false"]
        wall = timed(argv, env, where, lambda code: code == 0)
        (name,) = os.listdir(logs)
        with open(os.path.join(logs, name), encoding="utf-8") as f:
            results = json.load(f).get("results") or {}
        if not results.get("scores"):
            raise RuntimeError(f"inspect wrote no scores ({name})")
        accuracy = results["scores"][0]["metrics"]["accuracy"]["value"]
        return wall, results["total_samples"] - round(accuracy * results["completed_samples"])

    return run, note


def _version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError:
        return "?"


def peer_runners(folder: str) -> list[tuple[str, Runner | None, str]]:
    """(name, runner or None, what was installed or why it cannot run) for each peer."""
    os.makedirs(folder, exist_ok=True)
    peers = []
    for name, install in (("promptfoo", promptfoo), ("inspect-ai", inspect_ai)):
        runner, note = install(folder)
        peers.append((name, runner, note))
    return peers
