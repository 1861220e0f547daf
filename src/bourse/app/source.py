"""Importing the app's file from its source, never from a cached ``.pyc``.

CPython trusts a ``__pycache__`` entry whose recorded size and mtime (whole seconds) match the
file: an ``app.py`` edited within the second it was last imported, to the same length (``n * 2``
to ``n * 3``), would run its old code while the stage cache, which hashes the source, rightly
sees a change. The app's own file is small; compiling it each time costs nothing that shows.
(Modules the app imports still use CPython's cache, with the same one-second limit.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def exec_source(name: str, path: Path) -> ModuleType | None:
    """``path`` run as module ``name`` (registered in ``sys.modules``); None when it is not
    a Python module."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    exec(code, vars(module))  # the user's own app, as `python app.py` would run it
    return module
