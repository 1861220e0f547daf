"""Every Python block in docs/app.md runs as written.

A block that contains ``app = App(`` is a complete ``app.py``: it is run as
`bourse run --local app.py` runs it, in a fresh project, and when the next block is a ``json``
block, the value the run prints must equal it. A block whose first line is ``# file: NAME``
is a helper file written into every project. Any other Python block is an error: nothing goes
untested.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from app_harness import Project

DOC = Path(__file__).resolve().parents[2] / "docs" / "app.md"
FENCE = re.compile(r"^```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
HELPER = re.compile(r"# file: (?P<name>[\w./-]+)\n")


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int

    @property
    def helper(self) -> str | None:
        """The file name of a helper block."""
        found = HELPER.match(self.body) if self.lang == "python" else None
        return found["name"] if found else None


def blocks(text: str) -> list[Block]:
    return [Block(m["lang"], m["body"], text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def helper_files(found: list[Block]) -> dict[str, str]:
    files: dict[str, str] = {}
    for block in found:
        if block.helper:
            assert block.helper not in files, f"two helper blocks write {block.helper}"
            files[block.helper] = block.body
    return files


def app_cases(found: list[Block]) -> list[tuple[Block, str | None]]:
    """Each app block and the JSON block right after it, if any."""
    cases = []
    for i, block in enumerate(found):
        if block.lang == "python" and "app = App(" in block.body:
            after = found[i + 1] if i + 1 < len(found) else None
            cases.append((block, after.body if after and after.lang == "json" else None))
    return cases


FOUND = blocks(DOC.read_text())
CASES = app_cases(FOUND)


def test_every_python_block_is_an_app_or_a_helper_file() -> None:
    loose = [b.line for b in FOUND if b.lang == "python" and "app = App(" not in b.body
             and not b.helper]
    assert loose == [], f"python blocks at lines {loose} of docs/app.md are not tested"
    assert len(CASES) >= 6
    assert sorted(helper_files(FOUND)) == ["line_model.py", "train.py"]


def marks(block: Block) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if "lightning" in block.body else []


@pytest.mark.parametrize(("block", "expected"), [
    pytest.param(block, expected, id=f"line {block.line}", marks=marks(block))
    for block, expected in CASES])
def test_the_block_runs_as_written(project: Project, block: Block, expected: str | None) -> None:
    for name, text in helper_files(FOUND).items():
        project.write(name, text)
    project.write("app.py", block.body)

    value = project.run()  # what `bourse run --local app.py` does, in this process

    if expected is not None:
        assert json.loads(json.dumps(value)) == json.loads(expected)
