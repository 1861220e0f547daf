"""The server key: made once with mode 0600, refused when others can read it or it is not a
key; its subkeys differ per purpose."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bourse.server.files.keys import KEY_FILE, ServerKeyError, load_or_create, subkey


def test_made_once_private_and_stable(tmp_path: Path) -> None:
    key = load_or_create(tmp_path / "data")
    path = tmp_path / "data" / KEY_FILE
    assert len(key) == 32 and os.stat(path).st_mode & 0o777 == 0o600
    assert load_or_create(tmp_path / "data") == key
    assert subkey(key, "audit") != subkey(key, "secrets")


@pytest.mark.parametrize("mode, content, said", [
    (0o644, b"k" * 32, "readable by others"), (0o600, b"short", "32-byte key")])
def test_refused(tmp_path: Path, mode: int, content: bytes, said: str) -> None:
    path = tmp_path / KEY_FILE
    path.write_bytes(content)
    path.chmod(mode)
    with pytest.raises(ServerKeyError, match=said):
        load_or_create(tmp_path)
