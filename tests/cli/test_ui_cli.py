"""``bourse ui``: a link that opens the configured exchange's web UI signed in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bourse.cli.main import cli
from bourse.cli.ui import sign_in_link

TOKEN = "bt_abc+/="  # characters a URL must escape


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BOURSE_URL", "http://127.0.0.1:8765/")
    monkeypatch.setenv("BOURSE_TOKEN", TOKEN)


def test_the_link_carries_the_token_after_the_hash(configured: None) -> None:
    result = CliRunner().invoke(cli, ["ui"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "http://127.0.0.1:8765/ui/login#token=bt_abc%2B%2F%3D\n"


def test_a_page_to_land_on_and_json(configured: None) -> None:
    result = CliRunner().invoke(cli, ["ui", "runs", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "url": "http://127.0.0.1:8765/ui/",
        "sign_in": "http://127.0.0.1:8765/ui/login?next=/ui/runs#token=bt_abc%2B%2F%3D"}
    bad = CliRunner().invoke(cli, ["ui", "secrets"])
    assert bad.exit_code == 2 and "'secrets' is not one of" in bad.stderr


def test_without_an_exchange_it_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("BOURSE_URL", raising=False)
    monkeypatch.delenv("BOURSE_TOKEN", raising=False)
    result = CliRunner().invoke(cli, ["ui"])
    assert result.exit_code != 0
    assert "bourse up" in result.stderr or "bourse login" in result.stderr, result.stderr


def test_the_link_the_ui_reads() -> None:
    """The login page takes the token from the fragment (tests/ui drive it in a browser)."""
    assert sign_in_link("http://h:1", "t", "jobs") == "http://h:1/ui/login?next=/ui/jobs#token=t"
