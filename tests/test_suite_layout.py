"""The suite's own layout: test modules are imported by basename (rootdir-relative imports,
no ``__init__.py``), so two ``test_x.py`` in different folders fail collection in CI."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def test_every_test_module_has_its_own_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert len(names) > 100  # the suite itself, not an empty glob
    clashes = sorted(name for name, count in names.items() if count > 1)
    assert not clashes, f"rename one of each: {clashes}"
