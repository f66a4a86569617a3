#!/usr/bin/env bash
# The action's step: the inputs (INPUT_* variables) become the harness's settings, the run's verdict becomes the
# step's outputs, and the harness's exit code becomes the step's, so that 1, 2, 3 and 4 keep their meaning in the log.
set -uo pipefail

# An input given overrides a setting from the step's env; an empty one leaves it be.
setting() {
  if [ -n "$2" ]; then export "$1=$2"; fi
}
setting EVAL_TASKS "${INPUT_TASKS:-}"
setting EVAL_BACKEND "${INPUT_BACKEND:-}"
setting EVAL_AGENT_URL "${INPUT_AGENT_URL:-}"
setting EVAL_AGENT_CMD "${INPUT_AGENT_COMMAND:-}"
setting EVAL_MODEL "${INPUT_MODEL:-}"
setting EVAL_GATE "${INPUT_GATE:-}"
setting EVAL_RUNS "${INPUT_RUNS:-}"
setting EVAL_TASK_GLOB "${INPUT_TASK:-}"
setting EVAL_CATEGORY_GLOB "${INPUT_CATEGORY:-}"
setting EVAL_SHARD "${INPUT_SHARD:-}"
setting EVAL_BASELINE "${INPUT_BASELINE:-}"
setting EVAL_RESULTS "${INPUT_RESULTS:-eval-results.json}"
setting EVAL_JUNIT "${INPUT_JUNIT:-}"
setting EVAL_HTML "${INPUT_HTML:-}"

started="$(python3 -c 'import time; print(time.time())')"
python3 "${GITHUB_ACTION_PATH:?}/eval_agent.py"
code=$?

absolute() {
  if [ -n "$1" ]; then
    case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
  fi
}
{
  echo "exit-code=$code"
  echo "junit-path=$(absolute "${EVAL_JUNIT:-}")"
  echo "html-path=$(absolute "${EVAL_HTML:-}")"
  python3 - "$(absolute "$EVAL_RESULTS")" "$started" <<'VERDICT'
import json
import os
import sys

path, started = sys.argv[1], float(sys.argv[2])
try:
    if os.path.getmtime(path) < started:  # left by an earlier run: this one stopped before writing (bad input)
        raise OSError
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    print(f"results-path={path}")
    print(f"pass-rate={document['passRate']}")
    print(f"gate-passed={'true' if document['gatePassed'] else 'false'}")
except (OSError, ValueError, KeyError, TypeError):
    print("results-path=")
    print("pass-rate=")
    print("gate-passed=false")
VERDICT
} >> "${GITHUB_OUTPUT:?}"
exit "$code"
