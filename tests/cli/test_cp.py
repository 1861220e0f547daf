"""``bourse cp``, ``ls`` and ``rm`` refuse what they cannot do before asking the exchange
for anything (no credentials are issued for a command that cannot run); the copies
themselves are tested against the real store (tests/storage/test_transfer.py) and end to end
(tests/dataplane/test_cp_flow.py)."""

from __future__ import annotations

import pytest
from cli_exchange import FakeExchange
from click.testing import CliRunner

from bourse.cli.main import cli


@pytest.mark.parametrize(("args", "says"), [
    (["cp", "a", "b"], "both SOURCE and DEST are local paths"),
    (["cp", "file:///etc/passwd", "s3://bourse/x/"], "write the local path itself"),
    (["cp", "s3://Bad_Bucket/x", "."], "invalid bucket name"),
    (["ls", "./here"], "is not a store URI"),
    (["rm", "-r", "gs:/x"], "is not a store URI"),
])
def test_what_cannot_be_copied_is_refused_before_any_request(
        exchange: FakeExchange, args: list[str], says: str) -> None:
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not exchange.requests


def test_the_commands_are_listed() -> None:
    result = CliRunner().invoke(cli, ["--help"])

    assert all(f"  {name} " in result.output for name in ("cp", "ls", "rm"))
