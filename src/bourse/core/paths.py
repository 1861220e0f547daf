"""Paths a user writes that must stay inside a job's files: a job's ``workdir``, a stage's
script and TensorBoard directory.

Checked where they are written, so that ``workdir: ../../etc`` is refused at submit rather
than failing on a node: a path is relative (``src/train``), names no NUL byte, and does not
climb above its root once normalised (``a/../..`` climbs; ``a/../b`` is ``b``).
"""

from __future__ import annotations

import posixpath

from bourse.core.errors import InvalidInput


def inside(path: str, *, field: str, root: str = "the job's files") -> str:
    """``path`` itself when it stays inside ``root``; else an error naming ``field``."""
    hint = f"write a path relative to {root}, such as src/train, without .."
    if "\x00" in path:
        raise InvalidInput(f"{path!r} holds a NUL byte", field=field, hint=hint)
    if path.startswith("/"):
        raise InvalidInput(f"{path!r} is absolute", field=field, hint=hint)
    normal = posixpath.normpath(path) if path else "."
    if normal == ".." or normal.startswith("../"):
        raise InvalidInput(f"{path!r} points outside {root}", field=field, hint=hint)
    return path
