"""Credentials: environment first, then $BOURSE_HOME/credentials.json written 0600."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from bourse.core.errors import InvalidInput
from bourse.sdk.config import (
    Credentials,
    credentials_path,
    load_credentials,
    resolve_credentials,
    save_credentials,
)
from bourse.sdk.errors import NotConfigured


def env(home: Path, **extra: str) -> dict[str, str]:
    return {"BOURSE_HOME": str(home), **extra}


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    path = save_credentials("http://x:8000", "s3cret", env(tmp_path / "home"))
    assert path == tmp_path / "home" / "credentials.json"
    assert load_credentials(env(tmp_path / "home")) == Credentials("http://x:8000", "s3cret")
    assert json.loads(path.read_text()) == {"url": "http://x:8000", "token": "s3cret"}


def test_file_is_0600_and_folder_0700(tmp_path: Path) -> None:
    old = os.umask(0)  # even a permissive umask must not widen the file's mode
    try:
        path = save_credentials("http://x", "t", env(tmp_path / "home"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_save_replaces_atomically_leaving_no_temporary(tmp_path: Path) -> None:
    save_credentials("http://old", "a", env(tmp_path))
    save_credentials("http://new", "b", env(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["credentials.json"]
    assert load_credentials(env(tmp_path)).url == "http://new"


def test_environment_overrides_file_per_value(tmp_path: Path) -> None:
    save_credentials("http://file", "file-token", env(tmp_path))
    assert load_credentials(env(tmp_path, BOURSE_URL="http://env")) == Credentials(
        "http://env", "file-token")
    assert load_credentials(env(tmp_path, BOURSE_TOKEN="env-token")).token == "env-token"


def test_environment_alone_needs_no_file(tmp_path: Path) -> None:
    creds = load_credentials(env(tmp_path / "none", BOURSE_URL="http://e", BOURSE_TOKEN="t"))
    assert creds == Credentials("http://e", "t")


def test_explicit_values_win(tmp_path: Path) -> None:
    creds = resolve_credentials("http://arg", None, env(tmp_path, BOURSE_URL="http://env",
                                                         BOURSE_TOKEN="t"))
    assert creds == Credentials("http://arg", "t")


def test_missing_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(NotConfigured) as caught:
        load_credentials(env(tmp_path))
    text = str(caught.value)
    assert "bourse up" in text and "bourse login" in text
    assert str(credentials_path(env(tmp_path))) in text
    assert caught.value.exit_code == 2


def test_missing_token_only_is_named(tmp_path: Path) -> None:
    with pytest.raises(NotConfigured, match="no exchange token"):
        load_credentials(env(tmp_path, BOURSE_URL="http://e"))


def test_default_home_is_dot_bourse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert credentials_path({}) == tmp_path / ".bourse" / "credentials.json"


def test_corrupt_file_is_invalid_input(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text("{not json")
    with pytest.raises(InvalidInput, match="not a JSON object"):
        load_credentials(env(tmp_path))


def test_repr_hides_token() -> None:
    assert "s3cret" not in repr(Credentials("http://x", "s3cret"))
