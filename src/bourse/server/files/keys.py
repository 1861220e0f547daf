"""The server key: 32 random bytes in ``<data dir>/server.key`` (mode 0600), made at first
start. It keys the audit chain's HMAC and encrypts secrets; each use gets its own subkey.

Every coordinator sharing one database must share this file. Losing it makes stored secrets
unreadable and the audit chain unverifiable; back it up with the database, apart from it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from bourse.core.errors import BourseError

KEY_FILE = "server.key"
KEY_BYTES = 32


class ServerKeyError(BourseError):
    exit_code = 2


def load_or_create(data_dir: Path) -> bytes:
    """The key, created (exclusively, mode 0600) when there is none."""
    path = data_dir / KEY_FILE
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(path)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(KEY_BYTES))
        out.flush()
        os.fsync(out.fileno())
    return _read(path)


def _read(path: Path) -> bytes:
    if path.stat().st_mode & 0o077:
        raise ServerKeyError(f"{path} is readable by others",
                        hint=f"chmod 600 {path}; if others read it, rotate secrets")
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise ServerKeyError(f"{path} does not hold a {KEY_BYTES}-byte key",
                        hint="restore it from a backup; never edit it")
    return key


def subkey(key: bytes, purpose: str) -> bytes:
    """A key for one purpose, so that no two uses share key material."""
    return hmac.new(key, f"bourse/{purpose}".encode(), hashlib.sha256).digest()
