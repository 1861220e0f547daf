"""docs/reference/cli.md and sdk.md are what the code generates: they cannot drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from bourse.cli import reference


@pytest.mark.parametrize("name", ["cli.md", "sdk.md"])
def test_the_committed_reference_is_what_the_code_generates(name: str) -> None:
    path = reference.DOCS / name
    generated = reference.references()[path]
    assert path.read_text(encoding="utf-8") == generated, (
        f"{path} is stale: run `python -m bourse.cli.reference` and commit it")


def test_check_says_which_file_is_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(reference, "DOCS", tmp_path)
    assert reference.main(["--check"]) == 1
    assert "cli.md differs from the code" in capsys.readouterr().err
    assert reference.main([]) == 0
    assert reference.main(["--check"]) == 0
    assert (tmp_path / "sdk.md").read_text().startswith("# SDK reference")


def test_every_command_has_a_section() -> None:
    text = reference.cli_reference()
    for name in ("bourse stop", "bourse jobs show", "bourse completion", "bourse tokens revoke"):
        assert f"\n## {name}\n" in text
    assert "Usage: bourse jobs show [OPTIONS] JOB_ID" in text
    assert "-y, --yes" in text
