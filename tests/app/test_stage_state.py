"""What a stage's body leaves behind besides its outputs: the attributes it sets on ``self``
come back to the Work in the flow (as a LightningWork's state does), and an output used
without being declared is an error that names the stage, the output and the declared ones.

Every stage runs as a real local process (``bourse run --local``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from app_harness import Project

from bourse.app.call import changed_attributes, snapshot
from bourse.app.result import Outputs, StageFailed, UnknownOutput

HEAD = """
    from bourse import App, Compute, Flow, StageFailed, Work


"""

COUNTER = HEAD + """
    class Train(Work):
        calls = 0

        def run(self, lr: float) -> None:
            self.calls += 1
            self.best = {"lr": lr, "loss": round((lr - 0.1) ** 2, 4)}
            self.history = [*getattr(self, "history", []), lr]
            self.model = object()  # not JSON: stays in the job
            self._scratch = "private"


    class Sweep(Flow):
        def __init__(self):
            self.train = Train(compute=Compute("cpu"))

        def run(self):
            self.train.run(lr=0.3)
            self.train.run(lr=0.1)
            t = self.train
            return {"calls": t.calls, "best": t.best, "history": t.history,
                    "model": hasattr(t, "model"), "scratch": hasattr(t, "_scratch")}


    app = App(Sweep())
"""


def test_attributes_a_stage_sets_come_back_to_the_flow(project: Project,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    project.write("app.py", COUNTER)

    value = project.run()

    # the second call's job started from the state the first one passed back
    assert value == {"calls": 2, "best": {"lr": 0.1, "loss": 0.0}, "history": [0.3, 0.1],
                     "model": False, "scratch": False}
    out = capsys.readouterr().out
    assert out.count("[Train] bourse: stage 'Train' set attributes that are not JSON, which "
                     "stay in the job: model (object); return them, or write them to an "
                     "output") == 2
    assert "::bourse-attributes::" not in out


FAILING = HEAD + """
    class Risky(Work):
        def run(self) -> None:
            self.progress = "half way"
            raise RuntimeError("out of memory")


    class Careful(Flow):
        def __init__(self):
            self.risky = Risky(compute=Compute("cpu"), outputs=["model"])

        def run(self):
            try:
                self.risky.run()
            except StageFailed as failed:
                try:
                    failed.result.outputs["model"]
                except KeyError as missing:
                    return [hasattr(self.risky, "progress"), str(missing)]
"""


def test_a_failed_stage_passes_nothing_back(project: Project) -> None:
    project.write("app.py", FAILING + "\n    app = App(Careful())\n")

    assert project.run() == [False, "outputs: stage 'Risky' has no output 'model': it ended "
                                    "FAILED, so nothing was uploaded"]


CACHED = HEAD + """
    class Features(Work):
        def run(self, dim: int) -> None:
            self.dim_seen = dim


    class Twice(Flow):
        def __init__(self):
            self.first = Features(compute=Compute("cpu"), cache=True, name="first")
            self.again = Features(compute=Compute("cpu"), cache=True, name="first")

        def run(self):
            self.first.run(dim=8)
            cached = self.again.run(dim=8)
            return [cached.cached, self.again.dim_seen]


    app = App(Twice())
"""


def test_a_cached_result_passes_its_attributes_back_too(project: Project) -> None:
    project.write("app.py", CACHED)

    assert project.run() == [True, 8]


def test_attributes_that_came_back_make_the_next_call_another_call(project: Project) -> None:
    """They travel with the stage's next call, so they are part of its cache key."""
    project.write("app.py", CACHED.replace("cached = self.again.run(dim=8)",
                                           "cached = self.first.run(dim=8)")
                  .replace("self.again.dim_seen", "self.first.dim_seen"))

    assert project.run() == [False, 8]


UNDECLARED = HEAD + """
    class Train(Work):
        outputs = ("models",)

        def run(self) -> None:
            (self.outputs["models"] / "w.txt").write_text("1")


    class Pipeline(Flow):
        def __init__(self):
            self.train = Train(compute=Compute("cpu"))

        def run(self):
            return self.train.run().outputs["model"]


    app = App(Pipeline())
"""


def test_an_undeclared_output_names_the_stage_the_output_and_the_declared_ones(
        project: Project) -> None:
    project.write("app.py", UNDECLARED)

    with pytest.raises(UnknownOutput) as missing:
        project.run()

    assert isinstance(missing.value, KeyError)
    assert str(missing.value) == (
        "outputs: stage 'Train' has no output 'model'; it declares 'models' — did you mean "
        "'models'? a stage names its outputs: outputs = ('model',) on its class, or "
        "outputs=['model'] when constructing it")


def test_an_undeclared_output_written_in_the_body_fails_the_stage_saying_so(
        project: Project) -> None:
    body = UNDECLARED.replace('self.outputs["models"] /', 'self.outputs["modle"] /')
    project.write("app.py", body.replace('.outputs["model"]', '.value'))

    with pytest.raises(StageFailed) as failed:
        project.run()

    assert ("bourse.app.result.UnknownOutput: outputs: stage 'Train' has no output 'modle'; "
            "it declares 'models' — did you mean 'models'?") in failed.value.log_tail


def test_outputs_without_declared_names_say_there_are_none() -> None:
    with pytest.raises(KeyError, match="it declares no outputs — a stage names its outputs"):
        Outputs({}, stage="Prepare")["data"]


# (case, attributes before, the body's changes, passed back, stays in the job)
CHANGES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], list[str]]] = [
    ("a new attribute", {}, {"loss": 0.5}, {"loss": 0.5}, []),
    ("an unchanged one", {"lr": 0.1}, {}, {}, []),
    ("a list changed in place", {"seen": [1]}, {"seen": [1, 2]}, {"seen": [1, 2]}, []),
    ("a tuple comes back as a list", {}, {"pair": (1, 2)}, {"pair": [1, 2]}, []),
    ("a private one", {}, {"_cache": 1}, {}, []),
    ("what the runner sets", {}, {"outputs": {}, "inputs": {}, "checkpoint": "s3://x/"},
     {}, []),
    ("a set", {}, {"labels": {1, 2}}, {}, ["labels (set)"]),
    ("a NaN", {}, {"loss": float("nan")}, {}, ["loss (float)"]),
    ("too much to carry", {}, {"blob": "x" * 100_001}, {},
     ["all of them (100,013 characters of JSON; at most 100,000 come back)"]),
]


@pytest.mark.parametrize(("before", "changes", "back", "stays"), [c[1:] for c in CHANGES],
                         ids=[c[0] for c in CHANGES])
def test_which_attributes_come_back(before: dict[str, Any], changes: dict[str, Any],
                                    back: dict[str, Any], stays: list[str]) -> None:
    work = SimpleNamespace(**before)
    taken = snapshot(work)
    if "seen" in changes:
        work.seen.append(2)  # the same list object, mutated
    else:
        vars(work).update(changes)
    assert changed_attributes(taken, work) == (back, stays)
