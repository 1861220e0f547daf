"""The app's file is run from its source: a ``.pyc`` CPython would trust (same size, same
whole-second mtime) never replaces an edit."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import sys
from pathlib import Path

from bourse.app.source import exec_source


def _edit_within_the_second(path: Path) -> None:
    path.write_text("VALUE = 2\n")
    py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)))
    stamp = path.stat().st_mtime_ns
    path.write_text("VALUE = 3\n")  # the same length, as `n * 2` -> `n * 3`
    os.utime(path, ns=(stamp, stamp))


def test_an_edit_the_cache_cannot_see_is_run(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    _edit_within_the_second(app)
    spec = importlib.util.spec_from_file_location("stale_probe", app)
    assert spec is not None and spec.loader is not None
    cached = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cached)
    assert cached.VALUE == 2  # CPython's own import runs the stale bytecode
    module = exec_source("fresh_probe", app)
    assert module is not None and module.VALUE == 3
    assert sys.modules["fresh_probe"] is module and module.__file__ == str(app)
    del sys.modules["fresh_probe"]
