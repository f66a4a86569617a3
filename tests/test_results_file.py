"""The results file on disk: strict JSON whatever an agent sends, the mode it had, and no temporary file left behind."""

from __future__ import annotations

import glob
import json
import os
import select
import signal
import stat
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from typing import Any

from harness.results import Spool, render_json, write_atomic
from tests.support import CLI_TIMEOUT, ROOT, Received, TempDirTestCase, clean_env, run_cli, send

NON_FINITE_CALL = (
    b'{"toolCall": {"name": "imageman.asset.get", "args": {"assetId": NaN, "size": [Infinity, -Infinity]}}}'
)


def strict(text: str) -> Any:
    """JSON as a strict parser (jq, a browser) reads it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


class NonFiniteNumbers(TempDirTestCase):
    def test_an_agents_nan_and_infinity_are_written_as_marked_strings_and_the_file_stays_json(self) -> None:
        def non_finite(_received: Received, handler: BaseHTTPRequestHandler) -> None:
            send(handler, 200, NON_FINITE_CALL, {"Content-Type": "application/json"})

        agent = self.serve(non_finite)
        out = os.path.join(self.tmp, "r.json")
        env = clean_env(EVAL_BACKEND="http", EVAL_AGENT_URL=agent.url(), EVAL_RESULTS=out)
        reports = ("--shard", "1/1", "--junit", "j.xml", "--html", "r.html", "--summary-md", "s.md")
        _, stderr, code = run_cli(*reports, env=env, cwd=self.tmp)
        self.assertEqual(code, 1, stderr)
        with open(out, encoding="utf-8") as f:
            document = strict(f.read())
        entry = document["results"][0]
        self.assertEqual(
            entry["trialResults"][0]["toolCalls"][0]["args"], {"assetId": "NaN", "size": ["Infinity", "-Infinity"]}
        )
        self.assertEqual(
            entry["nonFinite"],
            [
                "/trialResults/0/toolCalls/0/args/assetId",
                "/trialResults/0/toolCalls/0/args/size/0",
                "/trialResults/0/toolCalls/0/args/size/1",
            ],
        )
        self.assertNotIn("nonFinite", document)
        _, stderr, code = run_cli("merge", "r.json", "--out", "merged.json", env=env, cwd=self.tmp)
        self.assertEqual(code, 1, stderr)
        with open(os.path.join(self.tmp, "merged.json"), encoding="utf-8") as f:
            self.assertEqual(strict(f.read())["results"][0], entry)  # read back and written again as it was

    def test_a_document_with_non_finite_numbers_renders_the_same_after_reading_it_back(self) -> None:
        document = {
            "manifest": {"backendSettings": {"temperature": float("inf")}},
            "results": [{"id": "t1", "trialResults": [{"args": {"a/b": float("nan"), "c~d": "NaN"}}]}],
        }
        text = "".join(render_json(document))
        read = strict(text)
        self.assertEqual(read["manifest"]["backendSettings"]["temperature"], "Infinity")
        self.assertEqual(read["nonFinite"], ["/manifest/backendSettings/temperature"])
        self.assertEqual(read["results"][0]["nonFinite"], ["/trialResults/0/args/a~1b"])  # RFC 6901 escapes
        self.assertEqual(read["results"][0]["trialResults"][0]["args"]["c~d"], "NaN")  # the agent's string, unmarked
        self.assertEqual("".join(render_json(read)), text)


class Mode(TempDirTestCase):
    def test_a_rewritten_results_file_keeps_its_mode(self) -> None:
        for mode in (0o600, 0o640):
            with self.subTest(mode=oct(mode)):
                path = os.path.join(self.tmp, f"r{mode:o}.json")
                write_atomic(path, ["{}\n"])
                os.chmod(path, mode)
                write_atomic(path, ["[]\n"])
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), mode)
                with open(path, encoding="utf-8") as f:
                    self.assertEqual(f.read(), "[]\n")

    def test_a_new_results_file_gets_the_mode_a_plain_open_gives(self) -> None:
        umask = os.umask(0o027)
        self.addCleanup(os.umask, umask)
        path = os.path.join(self.tmp, "new.json")
        write_atomic(path, ["{}\n"])
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o640)


# A writer that stops in the middle of its write, says so, and waits to be killed.
HALF_WRITTEN = """
import sys, time
from harness.results import write_atomic
def chunks():
    yield "{" * 1000
    print("writing", flush=True)
    time.sleep(60)
    yield "}"
write_atomic(sys.argv[1], chunks())
"""


class LeftoverTemporaryFiles(TempDirTestCase):
    def start_half_written(self, path: str) -> subprocess.Popen[str]:
        """A process stopped in the middle of writing path, its temporary file beside it."""
        writer = subprocess.Popen(
            [sys.executable, "-c", HALF_WRITTEN, path], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        self.addCleanup(writer.wait, 10)
        self.addCleanup(writer.stdout.close)  # type: ignore[union-attr]
        self.addCleanup(writer.kill)
        ready, _, _ = select.select([writer.stdout], [], [], CLI_TIMEOUT)
        self.assertTrue(ready, "the writer never began its write")
        self.assertEqual(writer.stdout.readline(), "writing\n")  # type: ignore[union-attr]
        return writer

    def test_the_next_run_removes_what_a_killed_run_left_and_not_what_a_running_one_is_writing(self) -> None:
        out = os.path.join(self.tmp, "r.json")
        killed = self.start_half_written(out)
        running = self.start_half_written(out)
        [killed_temporary] = [
            path for path in glob.glob(os.path.join(self.tmp, ".eval-*.tmp")) if str(killed.pid) in path
        ]
        os.kill(killed.pid, signal.SIGKILL)
        self.assertEqual(killed.wait(10), -signal.SIGKILL)
        self.assertEqual(len(glob.glob(os.path.join(self.tmp, ".eval-*.tmp"))), 2)

        _, stderr, code = run_cli(env=clean_env(EVAL_RESULTS=out), cwd=self.tmp)

        self.assertEqual(code, 0, stderr)
        left = glob.glob(os.path.join(self.tmp, ".eval-*.tmp"))
        self.assertEqual(len(left), 1)
        self.assertNotEqual(left, [killed_temporary])
        self.assertIn(str(running.pid), os.path.basename(left[0]))


class Entries(TempDirTestCase):
    def test_entries_longer_than_a_block_and_cut_inside_a_character_read_back_whole(self) -> None:
        spool = Spool(os.path.join(self.tmp, "r.json"))
        self.addCleanup(spool.close)
        block = 1 << 16
        entries = [
            {"id": "long", "text": "é" * (3 * block)},  # two bytes a character: blocks end inside one
            {"id": "short"},
            {"id": "at-the-edge", "text": "x" * (block - 30)},
            {"id": "many-blocks", "text": "🙂" * block},
        ]
        for entry in entries:
            spool.add(entry)
        self.assertEqual(list(spool), entries)
        self.assertEqual(list(spool), entries, "read again, from the start")
