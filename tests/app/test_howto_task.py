"""docs/howto/skypilot-task.md runs as written, against a real local exchange of its own,
started with a HOME of its own: its jobs share their agent's user and so its home, where the
page's example writes (``~/.bashrc``, SkyPilot's ``~/sky_workdir``, a ``~/configs`` mount),
and that must not be the home of whoever runs the tests.

A block whose first line is ``# file: NAME`` is written into a fresh project. Each ``sh``
block followed by a ``text`` block is run there by bash, with ``bourse`` on the PATH and the
exchange's environment, and the ``text`` block's lines must appear in its output (stdout and
stderr together), in order; a ``<...>`` in them stands for what differs from run to run (job
ids, paths, sizes, offers). The other ``sh`` blocks are named in `NOT_RUN`, so a new command
block cannot go untested unnoticed.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from app_harness import BOURSE
from exchange_harness import ExchangeUnderTest, local_exchange

pytestmark = pytest.mark.slow
DOC = Path(__file__).resolve().parents[2] / "docs" / "howto" / "skypilot-task.md"
FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
FILE = re.compile(r"# file: (?P<name>[\w./-]+)\n")
VARIES = re.compile(r"<[^<>\s]+>")
# command blocks shown but not run here: the exchange is the session's; a task.yaml is any
NOT_RUN = {"bourse up          # a coordinator, its object store and one agent, in the "
           "background\n",
           "bourse run --dry-run task.yaml\nbourse run --dry-run --json task.yaml | jq "
           ".would_take\n"}


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int


def blocks() -> list[Block]:
    text = DOC.read_text()
    return [Block(m["lang"], m["body"], text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def commands(found: list[Block]) -> list[tuple[Block, Block]]:
    """Each ``sh`` block with the ``text`` block of its output."""
    return [(block, after) for block, after in pairwise(found)
            if block.lang == "sh" and after.lang == "text"]


def expect_in_order(output: str, expected: str, where: int) -> None:
    at = 0
    for line in expected.splitlines():
        pattern = re.compile(".+?".join(re.escape(p) for p in VARIES.split(line)))
        found = pattern.search(output, at)
        assert found, f"line {where}: {line!r} not in the output after:\n{output[at:]}"
        at = found.end()


def test_every_command_block_is_run_or_named() -> None:
    found = blocks()
    run = {id(block) for block, _ in commands(found)}
    assert {b.body for b in found if b.lang == "sh" and id(b) not in run} == NOT_RUN
    assert {b.lang for b in found} <= {"sh", "text", "yaml", "python"}


@pytest.fixture(scope="module")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExchangeUnderTest]:
    """A local exchange whose coordinator, agents and jobs have ``HOME`` in a temporary
    folder (the commands run with it too: ``exchange.env``)."""
    root = tmp_path_factory.mktemp("howto")
    (root / "user-home").mkdir()
    with ExitStack() as stack:
        with pytest.MonkeyPatch.context() as patch:  # only while its processes start
            patch.setenv("HOME", str(root / "user-home"))
            running = stack.enter_context(local_exchange(root))
        yield running


def test_the_how_to_runs_as_written(exchange: ExchangeUnderTest, tmp_path: Path) -> None:
    assert exchange.env["HOME"].endswith("user-home")
    found = blocks()
    for block in found:
        if (named := FILE.match(block.body)) is not None:
            (tmp_path / named["name"]).write_text(block.body)
    env = {**exchange.env, "PATH": f"{BOURSE.parent}{os.pathsep}{exchange.env['PATH']}"}
    for command, output in commands(found):
        done = subprocess.run(["bash", "-c", command.body], cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180,
                              check=False)
        expect_in_order(done.stdout, output.body, command.line)
