"""The README's reference agrees with the code: its configuration table is the settings as declared."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import unittest

from backends import BACKEND, BACKENDS
from harness.config import RUN_SETTINGS
from harness.settings import described
from tests.support import ROOT, clean_env, run_cli

TABLE_HEAD = ["| flag | variable | default | meaning |", "|---|---|---|---|"]


def settings_table() -> list[str]:
    """The README's configuration table as the declarations make it: the run's settings, then each backend's."""
    groups = {"": (BACKEND, *RUN_SETTINGS), **{name: backend.SETTINGS for name, backend in BACKENDS.items()}}
    rows = []
    for item in described(groups):
        setting = item.setting
        flag = f"`{setting.flag}`" if setting.switch else f"`{setting.flag} {setting.metavar}`" if setting.flag else ""
        variables = ", ".join(f"`{var}`" for var in item.variables)
        rows.append(f"| {flag} | {variables} | {item.default} | {item.meaning} |")
    return TABLE_HEAD + rows


def readme_table() -> list[str]:
    """The table under the README's Configuration heading."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = lines.index(TABLE_HEAD[0], lines.index("## Configuration"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


class Readme(unittest.TestCase):
    def test_the_configuration_table_is_the_settings_as_declared(self) -> None:
        expected = settings_table()
        self.assertEqual(readme_table(), expected, "paste this into the README:\n" + "\n".join(expected))

    def test_the_worked_conversation_examples_are_the_shipped_tasks(self) -> None:
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        with open(os.path.join(ROOT, "eval-tasks.json"), encoding="utf-8") as f:
            shipped = {task["id"]: task for task in json.load(f)["tasks"]}
        for task_id in ("asset-tag-from-search", "ai-image-generate-asks-first"):
            with self.subTest(task_id):
                start = readme.index(f'```json\n{{\n  "id": "{task_id}"') + len("```json\n")
                self.assertEqual(json.loads(readme[start : readme.index("```", start)]), shipped[task_id])

    def test_the_argument_checks_example_runs_as_shown(self) -> None:
        with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        section = readme[readme.index("**An example that runs.**") : readme.index("### Porting an evalset")]
        task_file, agent, shown = (
            section[start + len(fence) : section.index("```", start + len(fence))]
            for fence in ("```json\n", "```python\n", "```\n$ ")
            for start in [section.index(fence)]
        )
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in (("weather-tasks.json", task_file), ("weather_agent.py", agent)):
                with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                    f.write(text)
            command = shown.splitlines()[0]
            self.assertEqual(
                command, 'EVAL_AGENT_CMD="python3 weather_agent.py" python3 eval_agent.py --tasks weather-tasks.json'
            )
            stdout, stderr, code = run_cli(
                "--tasks",
                "weather-tasks.json",
                env=clean_env(EVAL_AGENT_CMD=f"{sys.executable} weather_agent.py"),
                cwd=tmp,
            )
        self.assertEqual((stderr, code), ("", 1))
        timing = re.compile(r"  \d+(\.\d+)?ms")
        self.assertEqual(timing.sub("", stdout).splitlines(), timing.sub("", shown).splitlines()[1:])

    def test_every_setting_is_in_the_table(self) -> None:
        table = "\n".join(settings_table())
        for var in ("EVAL_GATE", "EVAL_AGENT_URL", "EVAL_AGENT_TOKEN", "OPENAI_API_KEY", "EVAL_MAX_TOKENS"):
            self.assertIn(f"`{var}`", table)


if __name__ == "__main__":
    unittest.main()
