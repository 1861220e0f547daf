"""``bourse up``'s parting hint names the data dir whenever ``bourse down`` alone would miss it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bourse.cli.up import down_command


def test_the_default_data_dir_needs_no_flag(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path))
    assert down_command(tmp_path / "local") == "bourse down"


def test_another_data_dir_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "home"))
    assert down_command(tmp_path / "my x") == f"bourse down --data-dir '{tmp_path}/my x'"
