"""Tables: plain and stable off a terminal, drawn by rich on one."""

from __future__ import annotations

import re

import pytest
from cli_exchange import FakeExchange, job_view
from click.testing import CliRunner

from bourse.cli import render
from bourse.cli.main import cli
from bourse.cli.render import plain_table, rich_table, table

ANSI = re.compile(r"\x1b\[[0-9;]*m")
HEADERS = ("ID", "NAME", "COST")
ROWS = [["j1", "[rank 1] train", "$0.50"], ["j22", "a-much-longer-name", "$12.00"]]


def test_the_plain_table_is_padded_text() -> None:
    assert plain_table(HEADERS, ROWS, right=(2,)).splitlines() == [
        "ID   NAME                  COST",
        "j1   [rank 1] train       $0.50",
        "j22  a-much-longer-name  $12.00",
    ]


def test_off_a_terminal_table_is_the_plain_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "styled", lambda: False)
    assert table(HEADERS, ROWS) == plain_table(HEADERS, ROWS)


def test_rich_draws_a_bold_header_over_a_rule_one_line_per_row() -> None:
    drawn = rich_table(HEADERS, ROWS, right=(2,), width=80)
    lines = [ANSI.sub("", line) for line in drawn.splitlines()]
    assert "\x1b[1m" in drawn  # the header is bold
    assert lines[0].split() == list(HEADERS)
    assert set(lines[1].strip()) <= {"─", " "}  # the rule under the header
    assert lines[2].split() == ["j1", "[rank", "1]", "train", "$0.50"]  # no markup read
    assert lines[3].split() == ["j22", "a-much-longer-name", "$12.00"]
    assert lines[2].endswith("$0.50") and lines[3].endswith("$12.00")  # right-aligned


def test_rich_never_cuts_a_cell_nor_folds_a_row() -> None:
    rows = [["a100-40gb", "x" * 200, "$1.00"]]
    lines = [ANSI.sub("", line) for line in rich_table(HEADERS, rows, (), 60).splitlines()]
    assert len(lines) == 3
    assert lines[2].split() == ["a100-40gb", "x" * 200, "$1.00"]


@pytest.mark.parametrize(("env", "tty", "expected"), [
    ({}, True, True), ({}, False, False), ({"NO_COLOR": "1"}, True, False),
    ({"TERM": "dumb"}, True, False),
])
def test_styled_only_on_a_terminal_that_wants_it(monkeypatch: pytest.MonkeyPatch,
                                                 env: dict[str, str], tty: bool,
                                                 expected: bool) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(render.sys.stdout, "isatty", lambda: tty)
    assert render.styled() is expected


def test_jobs_name_their_node(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "RUNNING", node_id="n-7f", node_name="gpu-box"))
    exchange.add_job(job_view("j2", "RUNNING", node_id="n-8a"))  # another project's node
    lines = CliRunner().invoke(cli, ["jobs"]).stdout.splitlines()
    assert [line.split()[3] for line in lines[1:]] == ["n-8a", "gpu-box"]
