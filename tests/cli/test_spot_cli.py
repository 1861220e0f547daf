"""Validation of the spot flags, before anything connects anywhere."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bourse.cli.main import cli


@pytest.mark.parametrize(("args", "says"), [
    (["agent", "--server", "http://127.0.0.1:1", "--spot-price", "0.2"], "needs --interruptible"),
    (["agent", "--server", "http://127.0.0.1:1", "--interruptible", "--spot-price", "-1"],
     "--spot-price"),
    (["agent", "--server", "http://127.0.0.1:1", "--region", "eu west"], "--region"),
    (["agent", "--server", "http://127.0.0.1:1", "--provider", "-x"], "--provider"),
    (["nodes", "reclaim", "n-1", "--notice", "soon"], "duration"),
    (["nodes", "reclaim", "n-1", "--notice", "2h"], "at most an hour"),
    (["cost", "--by", "week"], "--by"),
    (["cost", "--since", "yesterday"], "duration"),
])
def test_bad_spot_flags_are_refused(args: list[str], says: str) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert says in result.output
