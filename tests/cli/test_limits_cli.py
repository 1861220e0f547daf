"""Validation of the log rate limit flags, before anything starts or connects."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bourse.cli.main import cli
from bourse.core.ratelimit import LogLimit

AGENT = ["agent", "--server", "http://127.0.0.1:1"]


@pytest.mark.parametrize(("flags", "says"), [
    (["--log-rate", "fast"], "cannot read size 'fast'"),
    (["--log-rate", "-1MB"], "cannot read size"),
    (["--log-rate", "8MB", "--log-burst", "1MB"], "must be at least one second of the rate"),
])
def test_bad_log_limits_are_refused(tmp_path: Path, flags: list[str], says: str) -> None:
    server = ["server", "--data-dir", str(tmp_path / "server"), "--port", "0"]
    for command in (AGENT, server):
        result = CliRunner().invoke(cli, [*command, *flags])
        assert result.exit_code == 2, result.output
        assert says in result.output
    assert not (tmp_path / "server").exists()


def test_limits_read_as_sizes() -> None:
    assert LogLimit.parse("8MB", "256MB") == LogLimit()
    assert LogLimit.parse("0", "0") == LogLimit(rate=0, burst=0)
    assert LogLimit.parse("0.5MB", "1GB") == LogLimit(
        rate=512 * 1024, burst=1 << 30)
