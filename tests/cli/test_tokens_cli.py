"""``bourse tokens create``: a lifetime the exchange would refuse is refused here, in one line."""

from __future__ import annotations

import pytest
from cli_exchange import FakeExchange
from click.testing import CliRunner

from bourse.cli.main import cli


@pytest.mark.parametrize(("expires", "says"), [
    ("99999999d", "error: --expires: '99999999d' is longer than the most allowed, 1825d — "
                  "write at most 1825d"),
    ("6w3d", "error: --expires: cannot read '6w3d' as a duration"),
])
def test_a_lifetime_past_five_years_is_bad_input(exchange: FakeExchange, expires: str,
                                                 says: str) -> None:
    result = CliRunner().invoke(cli, ["tokens", "create", "--expires", expires])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(says)
    assert result.stderr.count("\n") == 1 and result.exception is not None
    assert not isinstance(result.exception, ValueError)  # exited: no traceback
    assert exchange.requests == []
