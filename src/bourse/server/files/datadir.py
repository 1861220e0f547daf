"""The coordinator's data dir is its user's alone: the directory and every directory below it
mode 0700, every file in it without group or other bits (0600), whatever the umask.

What the coordinator writes there holds what other users of the host must not read: the
SQLite database and its ``-wal`` and ``-shm`` (jobs' logs and specs), the server key, the
admin token, code bundles, the embedded store's data and root key. SQLite gives its ``-wal``
and ``-shm`` the mode of the database file, so the database is made 0600 before SQLite first
opens it (`private_file`); a data dir an earlier version left open is tightened at start
(`secure`), and the coordinator's log says what was changed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from bourse.core.errors import BourseError

OTHERS = 0o077  # group and other permission bits
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


class DataDirError(BourseError):
    exit_code = 2


def secure(data_dir: Path, keep: tuple[str, ...] = ()) -> list[Path]:
    """Make ``data_dir`` (created when missing) and everything below it private; return what
    had to be tightened. ``keep``: names at its top left as they are (the server key, which
    ``keys`` refuses to use when others could read it, rather than hiding that they could)."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    tightened = [data_dir] if _tighten(data_dir) else []
    for path in _tree(data_dir):
        if path.parent == data_dir and path.name in keep:
            continue
        if _tighten(path):
            tightened.append(path)
    return tightened


def private_file(path: Path) -> list[Path]:
    """Create ``path`` empty and 0600 when it does not exist; tighten it and its SQLite
    companions (``-wal``, ``-shm``) when they do. Returns what was tightened."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    candidates = [path, *(path.with_name(path.name + end) for end in SQLITE_COMPANIONS)]
    return [p for p in candidates if _tighten(p)]


def _tree(top: Path) -> Iterator[Path]:
    """Every directory and file below ``top``, symbolic links neither followed nor listed."""
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            path = Path(folder, name)
            if not path.is_symlink():
                yield path


def _tighten(path: Path) -> bool:
    """Drop ``path``'s group and other bits; False when it had none (or is gone)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode) or not mode & OTHERS:
        return False
    try:
        os.chmod(path, stat.S_IMODE(mode) & ~OTHERS)
    except PermissionError as exc:
        raise DataDirError(f"{path} is open to other users and cannot be made private "
                           f"({exc.strerror})",
                           hint=f"chown it to the coordinator's user, or chmod go= {path}"
                           ) from None
    return True
