"""The layout: one entrypoint at the top, the engine in harness/, backends/, imports running one way."""

from __future__ import annotations

import ast
import os
import tempfile
import unittest

from tests.support import ROOT

PACKAGES = ("harness", "backends")
# What a backend may take from the engine: records and errors, how settings (endpoints among them) are declared and
# read, how to say things, the secrets it masks in what it quotes of a reply before it cuts it, and the seam every
# exchange goes through, where a run's cassette records and replays.
MAX_LINE = 120  # characters, as ruff.toml's line-length
FOR_BACKENDS = {
    "harness", "harness.records", "harness.settings", "harness.endpoints", "harness.text", "harness.leaks",
    "harness.exchanges",
}  # fmt: skip


def project_modules() -> dict[str, str]:
    """Every module of the harness by its dotted name, with its path: eval_agent and everything under the packages."""
    modules = {"eval_agent": os.path.join(ROOT, "eval_agent.py")}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    dotted = os.path.relpath(os.path.join(folder, name), ROOT)[:-3].replace(os.sep, ".")
                    modules[dotted.removesuffix(".__init__")] = os.path.join(folder, name)
    return modules


def imports(path: str, modules: dict[str, str]) -> set[str]:
    """The project modules a module imports, at its top or in a function; an import names the module it reads from."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            found |= {arg.value for arg in node.args if isinstance(arg, ast.Constant)}
    # The subcommand table names its modules as strings, imported when chosen.
    found |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in modules}
    return found & set(modules)


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of imports, as the modules along it, or None."""
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                return [*path[path.index(imported) :], imported] if imported in path else [*path, imported]
            if imported not in state:
                found = visit(imported, [*path, imported])
                if found:
                    return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


class Layout(unittest.TestCase):
    def test_the_top_level_holds_one_python_module_the_entrypoint(self) -> None:
        tops = sorted(name for name in os.listdir(ROOT) if name.endswith(".py"))
        self.assertEqual(tops, ["eval_agent.py"])
        for folder in ("harness", "backends", "tests", "bench"):
            self.assertTrue(os.path.isdir(os.path.join(ROOT, folder)), folder)

    def test_the_run_reads_as_its_stages_in_at_most_60_lines(self) -> None:
        # Setting a run up is prepare's, each stage's work harness/stages.py's: what a run grows goes there.
        with open(os.path.join(ROOT, "eval_agent.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        run = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "run")
        self.assertLessEqual((run.end_lineno or run.lineno) - run.lineno + 1, 60)

    def test_no_module_shadows_a_standard_library_module(self) -> None:
        import sys

        for module in project_modules():
            with self.subTest(module):
                self.assertNotIn(module.rpartition(".")[2], sys.stdlib_module_names)


class LineLength(unittest.TestCase):
    def test_no_line_of_python_is_over_120_characters(self) -> None:
        # ruff's E501 (ruff.toml) lets a line of one word, or one that ends in a pragma comment, run past the limit.
        over = []
        for folder, folders, files in os.walk(ROOT):
            folders[:] = [name for name in folders if not name.startswith(".") and name != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as f:
                        over += [
                            f"{os.path.relpath(path, ROOT)}:{number}: {len(line)} characters"
                            for number, line in enumerate(f.read().splitlines(), 1)
                            if len(line) > MAX_LINE
                        ]
        self.assertEqual(over, [])


class Imports(unittest.TestCase):
    def setUp(self) -> None:
        self.modules = project_modules()
        self.graph = {module: imports(path, self.modules) - {module} for module, path in self.modules.items()}

    def test_the_checks_see_the_imports_there_are(self) -> None:
        self.assertGreaterEqual(len(self.modules), 30)
        self.assertIn("harness.verdict", self.graph["eval_agent"])
        self.assertIn("harness.subcommands.merge", self.graph["eval_agent"], "the subcommand table's modules count")
        self.assertIn("backends.transport", self.graph["backends.http_agent"], "an import inside a function counts")
        self.assertEqual(cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}), ["a", "b", "c", "a"])
        self.assertIsNone(cycle({"a": {"b"}, "b": set()}))

    def test_no_module_imports_one_that_imports_it_back(self) -> None:
        self.assertIsNone(cycle(self.graph))

    def test_the_engine_imports_neither_the_backends_nor_the_entrypoint(self) -> None:
        for module, imported in self.graph.items():
            if module.startswith("harness"):
                with self.subTest(module):
                    outside = {name for name in imported if name.startswith("backends") or name == "eval_agent"}
                    self.assertEqual(outside, set())

    def test_the_engine_imports_no_subcommand_a_subcommand_is_a_leaf(self) -> None:
        for module, imported in self.graph.items():
            if module.startswith("harness") and not module.startswith("harness.subcommands"):
                with self.subTest(module):
                    self.assertEqual({name for name in imported if name.startswith("harness.subcommands")}, set())

    def test_backends_take_from_the_engine_only_what_a_backend_needs(self) -> None:
        for module, imported in self.graph.items():
            if module.startswith("backends"):
                with self.subTest(module):
                    self.assertLessEqual({name for name in imported if name.startswith("harness")}, FOR_BACKENDS)
                    self.assertNotIn("eval_agent", imported)


def positional_settings(path: str, module: str) -> list[str]:
    """`harness.config.GATE` (or `module:line` where it is not assigned to a name) for every Setting(...) call in a
    module that gives an argument by position."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    named = {
        id(node.value): f"{module}.{node.targets[0].id}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    return [
        named.get(id(node), f"{module}:{node.lineno}")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == "Setting"
        and node.args
    ]


class Declarations(unittest.TestCase):
    def test_every_setting_is_declared_with_keywords(self) -> None:
        found = [name for module, path in project_modules().items() for name in positional_settings(path, module)]
        self.assertEqual(found, [], "Setting(var=..., flag=..., help=...), each argument by its name")

    def test_the_check_sees_a_positional_setting_wherever_it_is(self) -> None:
        source = (
            'GATE = Setting("EVAL_GATE", "--gate", help="h")\n'
            'def api_key(var):\n    return settings.Setting(var=var, flag=None, help="k", read=str, default=None)\n'
            'TOKEN = Setting(var="T", flag=None, help="t", secret=True)\n'
            'def made():\n    return Setting("V", flag=None, help="v")\n'
        )
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "module.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
            self.assertEqual(positional_settings(path, "m"), ["m.GATE", "m:6"])


if __name__ == "__main__":
    unittest.main()
