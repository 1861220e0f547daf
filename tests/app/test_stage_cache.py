"""``cache=True``: an identical call reuses the previous Result instead of running; a different
call (argument, input, code) runs. Stages append to ``calls.log`` in the project, so the log
says what really ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_harness import Project, local_path

from bourse import StageFailed
from bourse.app.cache import ResultCache
from bourse.app.exchange import ExchangeBackend
from bourse.app.result import Result
from bourse.core.states import JobState

APP = """
    from pathlib import Path

    from bourse import App, Compute, Flow, Work


    class Double(Work):
        outputs = ("doubled",)

        def run(self, n: int) -> int:
            with open("calls.log", "a") as log:
                log.write(f"{n}\\n")
            if Path("fail").exists():
                raise SystemExit("asked to fail")
            (self.outputs["doubled"] / "n.txt").write_text(str(n * 2))
            return n * 2


    class Read(Work):
        def run(self, doubled) -> str:
            return (doubled / "n.txt").read_text()


    class Calls(Flow):
        def __init__(self):
            self.double = Double(compute=Compute("cpu"), cache=True)
            self.read = Read(compute=Compute("cpu"))

        def run(self, *numbers):
            results = [self.double.run(n=int(n)) for n in numbers]
            return [[r.value, r.cached] for r in results]


    app = App(Calls())
"""


def test_an_identical_call_is_not_run_again(project: Project) -> None:
    project.write("app.py", APP)

    first = project.run("1", "1", "2")
    again = project.run("1", "2")

    assert first == [[2, False], [2, True], [4, False]]
    assert again == [[2, True], [4, True]]  # a later run of the app reuses them too
    assert project.lines("calls.log") == ["1", "2"]


def test_a_cached_result_s_outputs_feed_the_next_stage(project: Project) -> None:
    project.write("app.py", APP.replace(
        "            return [[r.value, r.cached] for r in results]",
        "            return [self.read.run(doubled=r.outputs['doubled']).value "
        "for r in results]"))

    assert project.run("5") == ["10"]
    assert project.run("5") == ["10"]
    assert project.lines("calls.log") == ["5"]


def test_a_cached_result_whose_outputs_were_removed_runs_again(
        project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.write("app.py", APP.replace(
        "            return [[r.value, r.cached] for r in results]",
        "            return [r.outputs['doubled'].uri for r in results]"))
    [first] = project.run("4")
    (local_path(first) / "n.txt").unlink()

    [second] = project.run("4")
    project.run("4")

    assert second != first and (local_path(second) / "n.txt").read_text() == "8"
    assert project.lines("calls.log") == ["4", "4"]  # the third run reused the second's
    assert "[Double] cache: the outputs of the cached result changed or are gone" in (
        capsys.readouterr().out)


def test_a_failed_call_is_not_remembered(project: Project) -> None:
    project.write("app.py", APP).write("fail", "")
    with pytest.raises(StageFailed):
        project.run("3")
    (project.root / "fail").unlink()

    assert project.run("3") == [[6, False]]
    assert project.lines("calls.log") == ["3", "3"]


def test_a_stage_without_cache_always_runs(project: Project) -> None:
    project.write("app.py", APP.replace("cache=True", "cache=False"))

    assert project.run("1", "1") == [[2, False], [2, False]]
    assert project.lines("calls.log") == ["1", "1"]


def test_a_code_change_runs_the_stage_again(project: Project) -> None:
    project.write("app.py", APP)
    assert project.run("1") == [[2, False]]
    project.write("app.py", APP.replace("return n * 2", "return n * 3"))

    assert project.run("1") == [[3, False]]


SCRIPT_APP = """
    from bourse import App, Compute, PythonScript

    app = App(PythonScript("show.py", compute=Compute("cpu"), cache=True,
                           env={"GREETING": "hello"}))
"""


def test_a_script_with_a_different_env_runs_again(project: Project) -> None:
    project.write("show.py", """
        import os

        with open("calls.log", "a") as log:
            log.write(os.environ["GREETING"] + "\\n")
    """)
    project.write("app.py", SCRIPT_APP).run()
    project.write("app.py", SCRIPT_APP.replace('"hello"', '"bonjour"')).run()

    assert project.lines("calls.log") == ["hello", "bonjour"]


class _BundleOnly:
    """The only call ExchangeBackend.bundle() makes to an exchange."""

    def ensure_bundle(self, path: Path, sha256: str) -> bool:
        return True


def test_the_exchange_cache_key_survives_its_own_cache_entries(project: Project) -> None:
    project.write("app.py", APP)
    before = ExchangeBackend(_BundleOnly(), project.root, "r-1").bundle()  # type: ignore[arg-type]
    ResultCache(project.root).put("k", Result("Double", "SUCCEEDED", 0, "j-1"), {})

    after = ExchangeBackend(_BundleOnly(), project.root, "r-2").bundle()  # type: ignore[arg-type]

    assert after == before


MINE = """
    from pathlib import Path

    from bourse import App, Compute, Data, Flow, Work


    class Count(Work):
        def run(self, corpus: Path) -> int:
            with open("calls.log", "a") as log:
                log.write("count\\n")
            return len((corpus / "words.txt").read_text().split())


    class Counting(Flow):
        def __init__(self):
            self.count = Count(compute=Compute("cpu"), cache=True)

        def run(self):
            return self.count.run(corpus=Data(Path("mine").resolve().as_uri() + "/")).value


    app = App(Counting())
"""


def test_changed_input_data_runs_the_stage_again(project: Project) -> None:
    project.write("app.py", MINE).write("mine/words.txt", "one two three")
    assert project.run() == 3
    project.write("mine/words.txt", "one two three four")

    assert project.run() == 4


def test_with_bourse_in_bourseignore_the_exchange_cache_key_is_stable(project: Project) -> None:
    """The workaround docs/app.md gives for the bug above."""
    project.write("app.py", APP).write(".bourseignore", ".bourse/\n")
    before = ExchangeBackend(_BundleOnly(), project.root, "r-1").bundle()  # type: ignore[arg-type]
    ResultCache(project.root).put("k", Result("Double", "SUCCEEDED", 0, "j-1"), {})

    after = ExchangeBackend(_BundleOnly(), project.root, "r-2").bundle()  # type: ignore[arg-type]

    assert after == before


def test_a_cached_result_keeps_its_status_a_job_state(tmp_path: Path) -> None:
    """The entry holds the state's string; read back, it is the enum again (``ok`` and the
    flow compare members)."""
    cache = ResultCache(tmp_path)
    cache.put("k", Result("Double", JobState.SUCCEEDED, 0, "j-1"), {})
    assert json.loads((tmp_path / ".bourse" / "cache" / "k.json").read_text())["status"] == (
        "SUCCEEDED")
    entry = cache.get("k")
    assert entry is not None and entry.result.cached
    assert entry.result.status is JobState.SUCCEEDED and entry.result.ok
