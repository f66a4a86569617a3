"""The README's reference agrees with the code: its configuration table is the settings as declared."""

from __future__ import annotations

import json
import os
import unittest

from backends import BACKEND, BACKENDS
from harness.config import RUN_SETTINGS
from harness.settings import described
from tests.support import ROOT

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

    def test_every_setting_is_in_the_table(self) -> None:
        table = "\n".join(settings_table())
        for var in ("EVAL_GATE", "EVAL_AGENT_URL", "EVAL_AGENT_TOKEN", "OPENAI_API_KEY", "EVAL_MAX_TOKENS"):
            self.assertIn(f"`{var}`", table)


if __name__ == "__main__":
    unittest.main()
