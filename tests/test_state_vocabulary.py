"""One vocabulary of states: the package names a job's, an attempt's or a node's state by its
member of ``bourse.core.states`` (a group of them by the sets there), never by its string.

A retyped string drifts from the enum it copies: a second ``JobState`` in the API's models, a
CLI's own tuple of waiting states, a template testing ``"PENDING"``. The walk reads every
module and template of ``src/bourse`` — but ``core/states.py``, which defines the states, and
the migrations, which are frozen history — and reports each string that is a state's value.
Two kinds of string are not states and pass: the members of another enum (the agent's own
``AttemptStatus``: the node's view of an attempt), and a table's column headings
(``*HEADERS``: a node's ``RUNNING`` jobs, an attempt's ``LOST`` work).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from bourse.core.states import AttemptState, JobState, NodeState
from bourse.protocol import api

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bourse"
DEFINED = PACKAGE / "core" / "states.py"
FROZEN = PACKAGE / "server" / "db" / "migrations"
STATES = frozenset(s.value for enum in (JobState, AttemptState, NodeState) for s in enum)
QUOTED = re.compile("[\"'](" + "|".join(sorted(STATES)) + ")[\"']")


def _is_enum(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).split(".")[-1].endswith("Enum") for base in node.bases)


def _is_headings(node: ast.Assign | ast.AnnAssign) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(isinstance(t, ast.Name) and t.id.endswith("HEADERS") for t in targets)


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    """The string constants under ``node``, but another enum's members and column headings."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef) and _is_enum(child):
            continue
        if isinstance(child, ast.Assign | ast.AnnAssign) and _is_headings(child):
            continue
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child
        yield from _strings(child)


def retyped(source: str) -> list[tuple[int, str]]:
    """(line, state) of each state written as a string in a module's source."""
    return [(c.lineno, c.value) for c in _strings(ast.parse(source)) if c.value in STATES]


def in_template(text: str) -> list[tuple[int, str]]:
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in QUOTED.finditer(text)]


def _checked(suffix: str) -> list[Path]:
    return sorted(p for p in PACKAGE.rglob(f"*{suffix}")
                  if p != DEFINED and FROZEN not in p.parents)


def test_no_module_retypes_a_state() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {state!r}" for path in _checked(".py")
             for line, state in retyped(path.read_text())]
    assert found == [], "name the state by its bourse.core.states member (or set)"


def test_no_template_retypes_a_state() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {state!r}" for path in _checked(".html")
             for line, state in in_template(path.read_text())]
    assert found == [], "decide in server/ui/views.py and pass the template the answer"


@pytest.mark.parametrize(("source", "found"), [
    ('if job.state == "PENDING":\n    pass\n', [(1, "PENDING")]),
    ('WAITING = ("PENDING", "SCHEDULED")\n', [(1, "PENDING"), (1, "SCHEDULED")]),
    ('State = Literal["online", "lost"]\n', [(1, "online"), (1, "lost")]),
    ('def f() -> str:\n    return "FAILED"\n', [(2, "FAILED")]),
    ('WORDS = {1: "lost"}\n', [(1, "lost")]),
    ('class Status(StrEnum):\n    RUNNING = "RUNNING"\n', []),  # another enum of its own
    ('class S(enum.Enum):\n    LOST = "LOST"\n', []),
    ('HEADERS = ("ID", "RUNNING")\n', []),  # a column heading
    ('msg = f"job is {state}, not RUNNING"\n', []),  # a sentence naming a state
    ('x = "running"\n', []),  # not a state's value
])
def test_the_walk_finds_states_written_as_strings(source: str,
                                                  found: list[tuple[int, str]]) -> None:
    assert retyped(source) == found


def test_the_template_scan_finds_quoted_states_only() -> None:
    text = ('<span class="state {{ job.state | lower }}">\n'
            '{% if job.state == "PENDING" %}\n{% if s in (\'LOST\', "x") %}\n')
    assert in_template(text) == [(2, "PENDING"), (3, "LOST")]


@pytest.mark.parametrize(("model", "enum"), [
    (api.JobView, JobState), (api.JobDetail, JobState), (api.RunView, JobState),
    (api.AttemptView, AttemptState), (api.NodeView, NodeState),
])
def test_the_api_models_hold_the_core_enums(model: type[BaseModel], enum: type) -> None:
    assert model.model_fields["state"].annotation is enum
