"""A run's stage graph from the URIs its stages read and write: tables of cases."""

from __future__ import annotations

import pytest

from bourse.core.dataflow import Edge, StageData, covers, edges, layers

RUN = "s3://bourse/runs/r-1"


def stage(name: str, reads: dict[str, str] | None = None,
          writes: tuple[str, ...] = ()) -> StageData:
    """A stage as the app API submits it: its outputs under the run's prefix."""
    return StageData(name, reads or {}, {o: f"{RUN}/{name}/{o}/" for o in writes})


def out(name: str, output: str) -> str:
    return f"{RUN}/{name}/{output}/"


def pairs(found: list[Edge]) -> list[tuple[str, str]]:
    return [(e.source, e.target) for e in found]


@pytest.mark.parametrize(("output", "uri", "expected"), [
    ("s3://bkt/out/model/", "s3://bkt/out/model/", True),
    ("s3://bkt/out/model/", "s3://bkt/out/model", True),  # a trailing / is no difference
    ("s3://bkt/out/model", "s3://bkt/out/model/", True),
    ("s3://bkt/out/model/", "s3://bkt/out/model/best.ckpt", True),
    ("s3://bkt/out/model/", "s3://bkt/out/model/epoch=3/best.ckpt", True),
    ("s3://bkt/out/model/", "s3://bkt/out/model-2/", False),  # a sibling sharing a prefix
    ("s3://bkt/out/model/", "s3://bkt/out/", False),  # a parent of the output
    ("s3://bkt/out/model/", "s3://other/out/model/", False),
    ("s3://bkt/out/model/", "gs://bkt/out/model/", False),
    ("s3://bkt/", "s3://bkt/anything/at/all", True),  # a whole bucket
    ("file:///data/x/", "file:///data/x/part-0", True),
    ("file:///data/x/", "file:///data/xy", False),
    ("S3://bkt/out/model/", "s3://bkt/out/model/x", True),  # spelled as the store grammar reads it
    ("file://localhost/data/x/", "file:///data/x/y", True),
])
def test_an_input_reads_an_output_when_it_is_it_or_lies_under_it(output: str, uri: str,
                                                                  expected: bool) -> None:
    assert covers(output, uri) is expected


def test_a_diamond() -> None:
    stages = [
        stage("prepare", writes=("data",)),
        stage("train", {"data": out("prepare", "data")}, ("model",)),
        stage("baseline", {"data": out("prepare", "data") + "train.csv"}, ("model",)),
        stage("compare", {"ours": out("train", "model") + "best.ckpt",
                          "theirs": out("baseline", "model")}),
    ]
    found = edges(stages)
    assert found == [Edge("prepare", "train", ("data",)), Edge("prepare", "baseline", ("data",)),
                     Edge("train", "compare", ("ours",)),
                     Edge("baseline", "compare", ("theirs",))]
    assert layers([s.name for s in stages], found) == [
        ["prepare"], ["train", "baseline"], ["compare"]]


def test_parallel_branches_stay_apart() -> None:
    stages = [
        stage("fetch-a", writes=("raw",)), stage("fetch-b", writes=("raw",)),
        stage("clean-a", {"raw": out("fetch-a", "raw")}, ("clean",)),
        stage("clean-b", {"raw": out("fetch-b", "raw")}, ("clean",)),
        stage("train-a", {"data": out("clean-a", "clean")}),
    ]
    found = edges(stages)
    assert pairs(found) == [("fetch-a", "clean-a"), ("fetch-b", "clean-b"),
                            ("clean-a", "train-a")]
    assert layers([s.name for s in stages], found) == [
        ["fetch-a", "fetch-b"], ["clean-a", "clean-b"], ["train-a"]]


def test_stages_without_inputs_or_with_inputs_from_outside_the_run_are_roots() -> None:
    stages = [
        stage("hello"),  # no inputs, no outputs
        stage("prepare", {"mnist": "s3://datasets/mnist/"}, ("data",)),
        # a cached result of an earlier run: another run's prefix
        stage("train", {"data": "s3://bourse/runs/r-0/prepare/data/"}, ("model",)),
        stage("evaluate", {"model": out("train", "model"), "test": "s3://datasets/mnist/"}),
    ]
    found = edges(stages)
    assert found == [Edge("train", "evaluate", ("model",))]
    assert layers([s.name for s in stages], found) == [["hello", "prepare", "train"],
                                                       ["evaluate"]]


def test_one_edge_per_pair_naming_every_input_it_carries() -> None:
    stages = [stage("prepare", writes=("train", "test")),
              stage("fit", {"b": out("prepare", "test"), "a": out("prepare", "train")})]
    assert edges(stages) == [Edge("prepare", "fit", ("a", "b"))]


def test_only_an_earlier_stage_feeds_a_later_one() -> None:
    # "early" reads a URI that "late" writes after it; "self" reads its own output
    stages = [StageData("early", {"x": "s3://bkt/shared/x/"}, {}),
              StageData("self", {"x": "s3://bkt/self/"}, {"y": "s3://bkt/self/"}),
              StageData("late", {}, {"x": "s3://bkt/shared/"})]
    assert edges(stages) == []


def test_a_longer_path_puts_a_stage_after_its_deepest_source() -> None:
    chain = [Edge("a", "b", ("x",)), Edge("b", "c", ("x",)), Edge("a", "c", ("y",))]
    assert layers(["a", "b", "c", "d"], chain) == [["a", "d"], ["b"], ["c"]]
    assert layers([], []) == []


def test_layers_refuse_a_cycle_and_unknown_stages() -> None:
    with pytest.raises(ValueError, match="cycle"):
        layers(["a", "b", "c"], [Edge("a", "b", ()), Edge("b", "a", ())])
    with pytest.raises(ValueError, match="unknown stage"):
        layers(["a"], [Edge("a", "z", ())])


def test_a_wide_run_is_quick() -> None:
    # a sweep: one dataset stage feeding 2,000 trials, each read by one report
    stages = [stage("data", writes=("d",))]
    stages += [stage(f"t{i}", {"d": out("data", "d")}, ("m",)) for i in range(2000)]
    stages.append(stage("report", {f"m{i}": out(f"t{i}", "m") for i in range(2000)}))
    found = edges(stages)
    assert len(found) == 4000
    assert [len(layer) for layer in layers([s.name for s in stages], found)] == [1, 2000, 1]
