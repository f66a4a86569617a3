#!/usr/bin/env bash
# The action's step: the inputs (INPUT_* variables) become the harness's settings, the run's verdict becomes the
# step's outputs, and the harness's exit code becomes the step's, so that 1, 2, 3 and 4 keep their meaning in the log.
set -uo pipefail

# An input given overrides a setting from the step's env; an empty one leaves it be, and where neither gives one,
# the action's own default (if any) applies. action.yml gives its inputs no default: GitHub would pass it as given.
setting() {
  if [ -n "$2" ]; then
    export "$1=$2"
  elif [ -z "${!1:-}" ] && [ -n "${3:-}" ]; then
    export "$1=$3"
  fi
}
setting EVAL_TASKS "${INPUT_TASKS:-}" eval-tasks.json
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
setting EVAL_RESULTS "${INPUT_RESULTS:-}" eval-results.json
setting EVAL_JUNIT "${INPUT_JUNIT:-}" eval-junit.xml
setting EVAL_HTML "${INPUT_HTML:-}" eval-report.html
# `none`, from the input or the step's env: no such report.
for report in EVAL_JUNIT EVAL_HTML; do
  if [ "${!report:-}" = none ]; then unset "$report"; fi
done

outputs="${GITHUB_ACTION_PATH:?}/action/outputs.py"
files=("$EVAL_RESULTS" "${EVAL_JUNIT:-}" "${EVAL_HTML:-}")
# What stands at the report paths now, so that the upload takes only what this run writes.
if before="$(python3 "$outputs" before "${files[@]}")"; then
  python3 "$GITHUB_ACTION_PATH/eval_agent.py"
  code=$?
else
  before=""
  code=2
fi
python3 "$outputs" after "$code" "$before" "${files[@]}" || code=4
exit "$code"
