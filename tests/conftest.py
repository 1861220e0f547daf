"""Settings of the whole suite.

Bytecode is written whatever ``PYTHONDONTWRITEBYTECODE`` says (container images often set
it): the suite starts hundreds of ``python -m bourse`` processes (coordinators, agents, the
CLI), and without ``__pycache__`` each compiles the ~200 modules it imports from source
(0.6 CPU-s a coordinator start); pytest's rewritten test modules are cached the same way
(15 CPU-s of each worker's collection). The files are ignored by git and left out of bundles.
This is loaded before pytest imports a test module and before xdist starts its workers,
whose environment, like every process a test starts, no longer has the variable.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(items: list[Any]) -> None:
    """The slow end-to-end tests first (in pytest-randomly's order among themselves, the same
    in every xdist worker): started last, a two-minute test would run alone at the end while
    the other workers wait; started first, the short tests fill the gaps around them."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's load scheduling, except that the tests of a module with a module-scoped
    fixture (a live exchange, a browser, an SSH fleet, a Kubernetes control plane) go to one
    worker, one after the other. Handed out one by one, they went to every worker, between
    other modules' tests, and each switch made the fixture again (an SSH fleet's ten seconds,
    three times). (``xdist_group`` would say it per test, but xdist 3.8 cannot rename a
    pytest 9 item to put it in its group.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    grouped = _module_fixture_files(config.rootpath)

    class ModuleFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in grouped else nodeid

    return ModuleFixtureScheduling(config, log)


def _module_fixture_files(root: Any) -> frozenset[str]:
    """The test files (rootdir-relative) that define, or sit under a conftest that defines, a
    module-scoped fixture."""
    tests = root / "tests"
    found: set[str] = set()
    for path in tests.rglob("*.py"):
        if 'scope="module"' not in path.read_text(errors="replace"):
            continue
        files = path.parent.glob("test_*.py") if path.name == "conftest.py" else [path]
        found.update(str(f.relative_to(root)) for f in files)
    return frozenset(found)



# --- CPU per test, for finding what makes the suite slow ----------------------------------------
# BOURSE_TEST_CPU_LOG=DIR writes one line per test to DIR/<worker>.tsv: the CPU seconds the
# worker spent on it, the CPU seconds of the processes it started and waited for (coordinators,
# agents, trainings), and its wall seconds. Off by default.

_CPU_LOG = os.environ.get("BOURSE_TEST_CPU_LOG")

if _CPU_LOG:
    import resource
    import time
    from collections.abc import Iterator

    import pytest

    def _cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
        own, children, wall = (_cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN),
                               time.monotonic())
        yield
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        line = "\t".join([f"{_cpu(resource.RUSAGE_SELF) - own:.2f}",
                          f"{_cpu(resource.RUSAGE_CHILDREN) - children:.2f}",
                          f"{time.monotonic() - wall:.2f}", item.nodeid])
        os.makedirs(_CPU_LOG, exist_ok=True)
        with open(os.path.join(_CPU_LOG, f"{worker}.tsv"), "a") as out:
            out.write(line + "\n")
