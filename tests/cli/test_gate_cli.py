"""`bourse gate`, and the compare step of docs/ci.md's workflow run as written."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from bourse.cli.main import cli
from bourse.core.gate import Check, judge, parse_tolerance

DOC = Path(__file__).parents[2] / "docs" / "ci.md"
BASELINE = {"accuracy": 0.962, "loss": 0.131}


def workflow_gate_step() -> list[str]:
    """The `bourse gate ...` command of the documented workflow."""
    step = re.search(r"run: (bourse gate .*)", DOC.read_text())
    assert step is not None, "docs/ci.md lost its compare step"
    return shlex.split(step.group(1))[1:]


@pytest.mark.parametrize(("metrics", "code", "says"), [
    ({"accuracy": 0.958, "loss": 0.132}, 0, "ok   accuracy: 0.958 against 0.962"),
    ({"accuracy": 0.940, "loss": 0.130}, 1, "FAIL accuracy: 0.94 regressed from 0.962"),
    ({"accuracy": 0.970, "loss": 0.150}, 1, "FAIL loss: 0.15 regressed from 0.131"),
    ({"accuracy": 0.970}, 1, "loss: not a number in the result"),
])
def test_the_documented_step_passes_and_fails(tmp_path: Path, metrics: dict[str, float],
                                              code: int, says: str) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "baseline.json").write_text(json.dumps(BASELINE))
    log = "bourse: submitted j-1\nepoch 1 ...\n" + json.dumps(metrics) + "\n"
    (tmp_path / "eval.log").write_text(log)  # what `bourse run ... | tee eval.log` saved
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        result = CliRunner().invoke(cli, workflow_gate_step())
    assert result.exit_code == code, result.output
    assert says in result.output


def test_a_log_without_metrics_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "log").write_text("no metrics here\n")
    (tmp_path / "base.json").write_text("{}")
    result = CliRunner().invoke(cli, ["gate", str(tmp_path / "log"), "--baseline",
                                      str(tmp_path / "base.json"), "--metric", "a"])
    assert result.exit_code == 2 and "holds no JSON object" in result.output


def test_tolerances() -> None:
    assert parse_tolerance("1%") == (0.01, True)
    assert parse_tolerance("0.5") == (0.5, False)
    with pytest.raises(ValueError, match="at least 0"):
        parse_tolerance("-1")
    assert judge(Check("a", tolerance=0.01), {"a": 0.95}, {"a": 0.96}).passed
    assert not judge(Check("a", tolerance=0.01), {"a": 0.9}, {"a": 0.96}).passed
    assert not judge(Check("a"), {"a": True}, {"a": 1.0}).passed  # a bool is not a number
