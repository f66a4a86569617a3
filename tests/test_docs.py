"""The docs agree with the code and with themselves: the reference's configuration table is the settings as declared,
the provider table names only backends and settings that exist, its examples run as shown, and every relative link in
README.md and docs/ leads to a file and a heading there."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import tempfile
import unittest

from backends import BACKEND, BACKENDS
from harness.config import RUN_SETTINGS
from harness.settings import described
from tests.providers import Call, Event, Policy, conversation_fake
from tests.support import CLI_TIMEOUT, ROOT, SHIPPED_TASKS, TempDirTestCase, clean_env, run_cli

TABLE_HEAD = ["| flag | variable | default | meaning |", "|---|---|---|---|"]
DOCS = os.path.join(ROOT, "docs")
README_MAX_LINES = 250
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\]\(([^()\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
PROVIDER_HEAD = "| provider | backend | base URL | what the harness sends | known quirks, and the setting for each |"
CODE = re.compile(r"`([^`]+)`")
WORLDS = os.path.join("examples", "worlds")
WORLDS_RUN = "$ EVAL_BACKEND=openai EVAL_MODEL=gpt-5.5 OPENAI_API_KEY=sk-... python3 eval_agent.py --tasks "
# What varies from run to run in a run's lines: each task's time, and the tokens and time of the replies.
VARYING = re.compile(r"  \d+(\.\d+)?ms|\d+ tokens in, \d+ out, \d+(\.\d+)? m?s of replies")


def read(*path: str) -> str:
    """A file of the repository, by its path from the root."""
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def markdown_files() -> list[str]:
    """README.md and every page under docs/."""
    pages = sorted(os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md"))
    return [os.path.join(ROOT, "README.md"), *pages]


def prose(path: str) -> str:
    """A Markdown file without its fenced code blocks, where a bracket is code, not a link."""
    with open(path, encoding="utf-8") as f:
        return FENCE.sub("", f.read())


def anchors(path: str) -> set[str]:
    """The fragments GitHub gives a file's headings: lowercase, spaces to '-', other punctuation than '-' and '_'
    dropped; a heading met again gets -1, -2..."""
    found: set[str] = set()
    for heading in HEADING.findall(prose(path)):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, count = slug, 0
        while anchor in found:
            count += 1
            anchor = f"{slug}-{count}"
        found.add(anchor)
    return found


def broken_links(path: str) -> list[str]:
    """The relative links of a Markdown file that lead to no file, or to no heading of it."""
    broken = []
    for target in LINK.findall(prose(path)):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        linked = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.isfile(linked):
            broken.append(f"{target}: no file {os.path.relpath(linked, ROOT)}")
        elif fragment and linked.endswith(".md") and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {os.path.relpath(linked, ROOT)}")
    return broken


def settings_table() -> list[str]:
    """The reference's configuration table as the declarations make it: the run's settings, then each backend's."""
    groups = {"": (BACKEND, *RUN_SETTINGS), **{name: backend.SETTINGS for name, backend in BACKENDS.items()}}
    rows = []
    for item in described(groups):
        setting = item.setting
        flag = f"`{setting.flag}`" if setting.switch else f"`{setting.flag} {setting.metavar}`" if setting.flag else ""
        variables = ", ".join(f"`{var}`" for var in item.variables)
        rows.append(f"| {flag} | {variables} | {item.default} | {item.meaning} |")
    return TABLE_HEAD + rows


def reference_table() -> list[str]:
    """The table under the Configuration heading of docs/reference.md."""
    lines = read("docs", "reference.md").splitlines()
    start = lines.index(TABLE_HEAD[0], lines.index("## Configuration"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def provider_rows() -> list[list[str]]:
    """The cells of each row of the table in docs/providers.md."""
    lines = read("docs", "providers.md").splitlines()
    start = lines.index(PROVIDER_HEAD) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[start:end]]


def table_problems(rows: list[list[str]]) -> list[str]:
    """What the provider table says that the backends do not declare: a backend unknown, a setting it does not read."""
    problems = []
    for provider, backends, *rest in rows:
        names = CODE.findall(backends)
        declared: set[str] = set()
        for name in names:
            if name not in BACKENDS:
                problems.append(f"{provider}: no backend {name!r}")
                continue
            declared |= {s.var for s in BACKENDS[name].SETTINGS} | {s.flag or "" for s in BACKENDS[name].SETTINGS}
        for word in CODE.findall(" | ".join(rest)):
            setting = re.match(r"([A-Z][A-Z0-9]*_[A-Z0-9_]+)(=|$)", word)  # a variable; a server's flags are not ours
            if setting and setting[1] not in declared:
                problems.append(f"{provider}: {setting[1]} is not a setting of {' or '.join(names)}")
    return problems


class Links(unittest.TestCase):
    def test_every_relative_link_leads_to_a_file_and_a_heading(self) -> None:
        files = markdown_files()
        self.assertGreater(len(files), 10, "README.md and the docs/ pages")
        for path in files:
            with self.subTest(os.path.relpath(path, ROOT)):
                self.assertEqual(broken_links(path), [])

    def test_the_link_check_finds_a_missing_file_and_a_missing_heading(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            page = os.path.join(tmp, "page.md")
            with open(page, "w", encoding="utf-8") as f:
                f.write("# A page: `its` title\n\n[ok](#a-page-its-title) [no](#nowhere) [gone](other.md)\n")
                f.write("```\n[code](#not-a-link)\n```\n[web](https://example.com/x)\n")
            self.assertEqual(
                broken_links(page),
                [
                    "#nowhere: no heading #nowhere in " + os.path.relpath(page, ROOT),
                    "other.md: no file " + os.path.relpath(os.path.join(tmp, "other.md"), ROOT),
                ],
            )

    def test_the_readme_is_read_in_five_minutes(self) -> None:
        self.assertLessEqual(len(read("README.md").splitlines()), README_MAX_LINES)


class Examples(unittest.TestCase):
    def test_the_configuration_table_is_the_settings_as_declared(self) -> None:
        expected = settings_table()
        self.assertEqual(reference_table(), expected, "paste this into docs/reference.md:\n" + "\n".join(expected))

    def test_the_readme_task_file_loads_and_runs(self) -> None:
        readme = read("README.md")
        start = readme.index('```json\n{\n  "version": 1') + len("```json\n")
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "eval-tasks.json"), "w", encoding="utf-8") as f:
                f.write(readme[start : readme.index("```", start)])
            stdout, stderr, code = run_cli("--tasks", "eval-tasks.json", env=clean_env(), cwd=tmp)
        self.assertEqual((stderr, code), ("", 1))
        self.assertIn("PASS  asset-get-details", stdout)
        self.assertIn("gate not met: below the gate, blocking task failed (safety-leak-secrets)", stdout)

    def test_the_worked_conversation_examples_are_the_shipped_tasks(self) -> None:
        tasks = read("docs", "tasks.md")
        with open(os.path.join(ROOT, "eval-tasks.json"), encoding="utf-8") as f:
            shipped = {task["id"]: task for task in json.load(f)["tasks"]}
        for task_id in ("asset-tag-from-search", "ai-image-generate-asks-first"):
            with self.subTest(task_id):
                start = tasks.index(f'```json\n{{\n  "id": "{task_id}"') + len("```json\n")
                self.assertEqual(json.loads(tasks[start : tasks.index("```", start)]), shipped[task_id])

    def test_the_quarantine_example_loads_and_is_warned_of_as_shown(self) -> None:
        from harness.records import Quarantine
        from harness.taskfile import parse_task_file
        from harness.taskfile.quarantine import quarantine_warnings
        from tests.support import canonical_task_data

        section = read("docs", "tasks.md").split("\n## Quarantine\n", 1)[1]
        (example,) = fenced(section, '{\n  "id": "asset-search-semantic"')
        data = canonical_task_data()
        data["tasks"][1] = json.loads(example)
        task_file, problems = parse_task_file(json.dumps(data).encode(), "tasks.json", {})
        self.assertEqual(problems, [])
        assert task_file is not None
        written = data["tasks"][1]["quarantine"]
        self.assertEqual(task_file.tasks[1].quarantine, Quarantine("2027-01-15", written["reason"], written["issue"]))
        (shown,) = fenced(section, "warning: quarantine of")
        said = [
            *quarantine_warnings(task_file.tasks, "2027-01-12"),
            *quarantine_warnings(task_file.tasks, "2027-01-15"),
        ]
        self.assertEqual([f"warning: {line}" for line in said], shown.splitlines())

    def test_the_argument_checks_example_runs_as_shown(self) -> None:
        tasks = read("docs", "tasks.md")
        start = tasks.index("**An example that runs.**")
        section = tasks[start : tasks.index("\n#", start)]
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

    def test_what_a_run_prints_is_what_the_shipped_example_prints(self) -> None:
        for page in ("README.md", os.path.join("docs", "reference.md")):
            with self.subTest(page):
                (shown,) = fenced(read(page), "$ python3 eval_agent.py --tasks examples/")
                command, lines = shown.split("\n", 1)
                with tempfile.TemporaryDirectory() as tmp:
                    env = clean_env(EVAL_RESULTS=os.path.join(tmp, "eval-results.json"))
                    stdout, stderr, code = run_cli(*command.split()[3:], env=env, cwd=ROOT)
                self.assertEqual((stderr, code), ("", 1))
                self.assertEqual(VARYING.sub("", stdout), VARYING.sub("", lines))

    def test_every_setting_is_in_the_table(self) -> None:
        table = "\n".join(settings_table())
        for var in ("EVAL_GATE", "EVAL_AGENT_URL", "EVAL_AGENT_TOKEN", "OPENAI_API_KEY", "EVAL_MAX_TOKENS"):
            self.assertIn(f"`{var}`", table)


# A model played out by the OpenAI fake, task by task: for each user turn, the calls it makes (one a step), then its
# text. Careful does what each task asks (tidy-up in another order than the task's trajectory); careless slips once in
# each task.
Turns = list[tuple[list[Call], str]]
CAREFUL: dict[str, Turns] = {
    "Rename draft.txt to final.txt and delete old-notes.txt.": [
        ([("fs_rm", {"path": "old-notes.txt"}), ("fs_mv", {"source": "draft.txt", "target": "final.txt"})], "Done.")
    ],
    "Share notes.txt with Ana.": [
        (
            [("contacts_find", {"name": "ana"}), ("fs_share", {"path": "notes.txt", "email": "ana@example.com"})],
            "Shared.",
        )
    ],
    "What's in my folder?": [
        ([("fs_ls", {})], "draft.txt, notes.txt and old-notes.txt."),
        ([], "Three."),
        ([("fs_mv", {"source": "old-notes.txt", "target": "archive/old-notes.txt"})], "Moved."),
    ],
}
CARELESS: dict[str, Turns] = {
    "Rename draft.txt to final.txt and delete old-notes.txt.": [
        ([("fs_mv", {"source": "draft.txt", "target": "final.txt"})], "Done.")
    ],
    "Share notes.txt with Ana.": [
        (
            [("contacts_find", {"name": "Anna"}), ("fs_share", {"path": "notes.txt", "email": "anna@example.com"})],
            "Shared.",
        )
    ],
    "What's in my folder?": [
        ([("fs_ls", {})], "draft.txt, notes.txt and old-notes.txt."),
        ([("fs_ls", {})], "Three."),
        ([("fs_mv", {"source": "old-notes.txt", "target": "archive/old-notes.txt"})], "Moved."),
    ],
}


def playing(model: dict[str, Turns]) -> Policy:
    """The fake's policy for a model: by the conversation's first message and the turn it is in."""

    def policy(events: list[Event]) -> tuple[list[Call], str | None]:
        users = [index for index, event in enumerate(events) if event[0] == "user"]
        calls, text = model[events[users[0]][1]][len(users) - 1]
        made = sum(event[0] == "assistant" for event in events[users[-1] :])
        return ([calls[made]], None) if made < len(calls) else ([], text)

    return policy


def fenced(page: str, first: str) -> list[str]:
    """The text of each fenced block of a page whose first line starts with `first` (that line included)."""
    return [
        block.split("\n", 1)[1].rsplit("```", 1)[0]
        for block in FENCE.findall(page)
        if block.split("\n", 1)[1].startswith(first)
    ]


class TheWorldsGuide(TempDirTestCase):
    """docs/worlds.md as a reader follows it: examples/worlds/ validated, then run on a model (here the OpenAI fake
    playing one), printing the lines the guide shows and recording what it shows of the results."""

    def setUp(self) -> None:
        super().setUp()
        self.guide = read("docs", "worlds.md")
        with open(os.path.join(ROOT, WORLDS, "eval-tasks.json"), encoding="utf-8") as f:
            self.shipped = json.load(f)

    def run_model(self, model: dict[str, Turns]) -> tuple[str, int]:
        """The run's lines as the guide would show them (a real model's address, no times or tokens), and its exit."""
        invalid: list[str] = []
        fake = self.serve(conversation_fake("openai", playing(model), invalid))
        env = clean_env(
            EVAL_BACKEND="openai",
            EVAL_MODEL="gpt-5.5",
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=fake.url("/v1"),
            EVAL_RESULTS=os.path.join(self.tmp, "eval-results.json"),
        )
        stdout, stderr, code = run_cli("--tasks", os.path.join(WORLDS, "eval-tasks.json"), env=env, cwd=ROOT)
        self.assertEqual((stderr, invalid), ("", []))
        stdout = stdout.replace(fake.url("/v1"), "https://api.openai.com/v1")
        return VARYING.sub("", stdout), code

    def shown_run(self, index: int) -> str:
        """The lines the guide shows a run print, without its command or what varies, by its place on the page."""
        runs = fenced(self.guide, WORLDS_RUN)
        self.assertEqual(len(runs), 2, "a careful run, then a careless one")
        command, lines = runs[index].split("\n", 1)
        self.assertEqual(command, WORLDS_RUN + "examples/worlds/eval-tasks.json")
        return VARYING.sub("", lines)

    def test_the_guide_quotes_the_shipped_example_as_it_is(self) -> None:
        tasks = {task["id"]: task for task in self.shipped["tasks"]}
        quoted = fenced(self.guide, '{\n  "id": ')
        self.assertEqual(sorted(json.loads(block)["id"] for block in quoted), sorted(tasks))
        for block in quoted:
            self.assertEqual(json.loads(block), tasks[json.loads(block)["id"]])
        for key in ("environment", "toolResults"):
            with self.subTest(key):
                (block,) = fenced(self.guide, f'"{key}": ')
                self.assertEqual(json.loads("{" + block + "}"), {key: self.shipped[key]})
        (environment,) = fenced(self.guide, "class FileSystem")
        source = read(WORLDS, "files.py")
        for part in environment.split("    ...\n"):
            self.assertIn(part, source)

    def test_validate_reads_the_example_as_the_guide_shows(self) -> None:
        (shown,) = fenced(self.guide, "$ python3 eval_agent.py validate")
        command, first, rest = shown.split("\n", 2)
        self.assertEqual(
            (command, rest), (f"$ python3 eval_agent.py validate --tasks {WORLDS}/eval-tasks.json", "...\n")
        )
        stdout, stderr, code = run_cli("validate", "--tasks", os.path.join(WORLDS, "eval-tasks.json"), cwd=ROOT)
        self.assertEqual((stdout.splitlines()[0], stderr, code), (first, "", 0))
        self.assertNotIn("has no scripted result", stdout, "the tools the environment answers need no script")

    def test_a_model_that_does_what_is_asked_passes_every_task(self) -> None:
        self.assertEqual(self.run_model(CAREFUL), (self.shown_run(0), 0))

    def test_a_careless_model_fails_each_task_as_the_guide_says_and_the_results_show_why(self) -> None:
        self.assertEqual(self.run_model(CARELESS), (self.shown_run(1), 1))
        (shown,) = fenced(self.guide, '{"id": "share-with-ana"')
        excerpt = json.loads(shown)
        entries = {entry["id"]: entry["trialResults"][0] for entry in self.read_json("eval-results.json")["results"]}
        trial = entries["share-with-ana"]
        self.assertEqual({key: trial[key] for key in excerpt["trialResults"][0]}, excerpt["trialResults"][0])
        verdicts = [turn["verdict"]["code"] for turn in entries["archive-after-a-look"]["conversation"]]
        self.assertEqual(verdicts, [None, "turn:called-tool", None])

    def test_state_checks_on_a_replay_of_a_cassette_without_the_served_calls_are_refused_before_anything_is_sent(
        self,
    ) -> None:
        env = clean_env(EVAL_AGENT_CMD=f"{sys.executable} -c pass", EVAL_RESULTS=os.path.join(self.tmp, "r.json"))
        tasks, cassette = os.path.join(WORLDS, "eval-tasks.json"), os.path.join(self.tmp, "c.jsonl")
        run_cli("--tasks", tasks, "--task", "share-with-ana", "--record", cassette, env=env, cwd=ROOT)
        os.remove(os.path.join(self.tmp, "r.json"))
        with open(cassette, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        with open(cassette, "w", encoding="utf-8") as f:  # as recorded before a cassette held the served calls
            f.writelines(json.dumps({k: v for k, v in line.items() if k != "served"}) + "\n" for line in lines)
        stdout, stderr, code = run_cli(
            "--tasks", tasks, "--task", "share-with-ana", "--replay", cassette, env=env, cwd=ROOT
        )
        self.assertEqual((stdout, code), ("", 2))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "r.json")))
        self.assertIn(
            f"`{stderr.strip().replace(tasks, 'examples/worlds/eval-tasks.json')}`", " ".join(self.guide.split())
        )


class TheExampleAgent(TempDirTestCase):
    """examples/http_agent.py, the agent the README tells a newcomer to start from, judged by the harness."""

    def setUp(self) -> None:
        super().setUp()
        agent = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "examples", "http_agent.py"), "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert agent.stdout is not None
        self.addCleanup(agent.stdout.close)
        self.addCleanup(agent.wait, CLI_TIMEOUT)
        self.addCleanup(agent.kill)
        ready, _, _ = select.select([agent.stdout], [], [], CLI_TIMEOUT)
        self.assertTrue(ready, "the example agent says where it listens")
        self.url = agent.stdout.readline().split()[-1]

    def run_on(self, *args: str) -> tuple[str, str, int]:
        env = clean_env(
            EVAL_TASKS=SHIPPED_TASKS,
            EVAL_AGENT_URL=self.url,
            EVAL_CANARY="canary-7d1f",
            EVAL_RESULTS=os.path.join(self.tmp, "eval-results.json"),
        )
        return run_cli(*args, env=env, cwd=self.tmp)

    def test_the_tasks_its_keyword_rule_covers_pass(self) -> None:
        stdout, stderr, code = self.run_on("--task", "asset-get-details", "--task", "safety-leak-secrets")
        self.assertEqual((stderr, code), ("", 0))
        self.assertIn("2/2 PASS at 100%", stdout)

    def test_the_canonical_tasks_fail_it_honestly(self) -> None:
        stdout, stderr, code = self.run_on()
        self.assertEqual((stderr, code), ("", 1))
        self.assertRegex(stdout, r"FAIL  safety-fake-news-photo .* refusal:called-tool")
        self.assertIn("gate not met: below the gate, blocking task failed (safety-fake-news-photo)", stdout)


if __name__ == "__main__":
    unittest.main()


class Providers(unittest.TestCase):
    def test_the_provider_table_names_only_backends_and_settings_that_exist(self) -> None:
        rows = provider_rows()
        self.assertGreaterEqual(len(rows), 11)
        self.assertEqual(table_problems(rows), [])

    def test_every_provider_backend_is_in_the_provider_table(self) -> None:
        named = {name for row in provider_rows() for name in CODE.findall(row[1])}
        providers = {name for name, backend in BACKENDS.items() if hasattr(backend, "API_KEY")}
        self.assertEqual(providers - named, set())

    def test_the_table_check_finds_an_unknown_backend_and_a_setting_of_another_backend(self) -> None:
        rows = [["X", "`nope`", "", "", ""], ["Y", "`anthropic`", "`OPENAI_BASE_URL=http://x`", "", "`EVAL_MODEL`"]]
        self.assertEqual(
            table_problems(rows),
            ["X: no backend 'nope'", "Y: OPENAI_BASE_URL is not a setting of anthropic"],
        )
