"""Values that could only ever wait or fail on a node are refused where they are written:
every count and size is bounded by what one node can have, every pattern by its grammar,
every path by the directory it must stay in, every duration by a ceiling. Each error names
its field and says what to write instead."""

from __future__ import annotations

from typing import Any

import pytest

from bourse.core.compute import LIMITS, MAX_GPUS, Compute
from bourse.core.errors import InvalidInput
from bourse.core.paths import inside
from bourse.core.units import MAX_PRICE, describe_duration, parse_duration

# (case, Compute arguments, field, what the message or hint says)
TOO_MUCH = [
    ("a GPU count of a trillion", {"gpu": "a100:1000000000000"}, "gpu", "from 1 to 64"),
    ("a GPU count above the bound", {"gpu": f"h100:{MAX_GPUS + 1}"}, "gpu", "from 1 to 64"),
    ("a GPU count in other digits", {"gpu": "a100:²"}, "gpu", "whole number"),
    ("gpus=", {"gpus": 10**12}, "gpus", "from 1 to 64"),
    ("a GPU count in the JSON form", {"gpu": {"models": [], "count": 10**12}}, "gpu.count",
     "at most 64"),
    ("GPU memory", {"gpu_memory": "2TB"}, "gpu_memory", "at most 1,024GB"),
    ("GPU memory in the label", {"gpu": "2000GB+"}, "gpu_memory", "at most 1,024GB"),
    ("cpus", {"cpus": "100000000"}, "cpus", "100,000,000 is more than any node has"),
    ("cpus written huge", {"cpus": "1e300"}, "cpus", "at most 4,096"),
    ("cpus as an upper bound", {"cpus": "8..99999"}, "cpus", "write low+ for no upper bound"),
    ("cpus in the JSON form", {"cpus": {"min": 1e300}}, "cpus", "at most 4,096"),
    ("memory", {"memory": "99999999TB"}, "memory", "at most 65,536GB"),
    ("disk", {"disk": "2048TB"}, "disk", "at most 1,048,576GB"),
    ("a price ceiling", {"max_price": "99999"}, "max_price", "at most 10000"),
    ("nodes", {"num_nodes": 10**12}, "num_nodes", "from 1 to 1024"),
    ("regions", {"regions": [f"r{i}" for i in range(65)]}, "regions", "at most 64"),
]


@pytest.mark.parametrize(("kwargs", "field", "says"), [c[1:] for c in TOO_MUCH],
                         ids=[c[0] for c in TOO_MUCH])
def test_more_than_any_node_has_is_refused(kwargs: dict[str, Any], field: str,
                                           says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        Compute(**kwargs)
    assert refused.value.field == field
    assert says in str(refused.value)


def test_the_bounds_themselves_are_accepted() -> None:
    compute = Compute(f"a100:{MAX_GPUS}", cpus=LIMITS["cpus"][0], memory="64TB",
                      disk="1024TB", gpu_memory="1024GB", max_price=MAX_PRICE, num_nodes=1024)
    assert compute.gpu is not None and compute.gpu.count == MAX_GPUS
    assert compute.cpus.min == 4096 and compute.memory.min == 64 * 1024


# (case, Compute arguments, field, what the message or hint says)
BAD_PATTERNS = [
    ("a bracket that opens no class", {"regions": "["}, "regions", "never closed"),
    ("an unclosed class after a glob", {"exclude_regions": ["eu-*", "us-[ab"]},
     "exclude_regions", "write a class as [abc]"),
    ("an unclosed negated class", {"providers": "[!aws"}, "providers", "never closed"),
    ("a control character", {"exclude_providers": "aws\x01"}, "exclude_providers",
     "control character"),
    ("a name too long to be one", {"regions": "r" * 300}, "regions", "longer than 256"),
    ("a tag no node can carry", {"tags": "Prod"}, "tags", "lower-case letters"),
    ("a requirement that is an option", {"packages": ["--index-url=http://x"]}, "packages",
     "not a requirement specifier"),
    ("an image that is an option", {"image": "--privileged"}, "image",
     "not an image reference"),
    ("an image with a space", {"image": "python 3"}, "image", "e.g. python:3.12-slim"),
]


@pytest.mark.parametrize(("kwargs", "field", "says"), [c[1:] for c in BAD_PATTERNS],
                         ids=[c[0] for c in BAD_PATTERNS])
def test_a_pattern_outside_its_grammar_is_refused(kwargs: dict[str, Any], field: str,
                                                  says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        Compute(**kwargs)
    assert refused.value.field == field
    assert says in str(refused.value)


@pytest.mark.parametrize("kwargs", [
    {"regions": ["us-east-*", "eu-west-[12]", "ap-?", "[!x]*", "[]]", "[[]"]},
    {"regions": ["California, US, NA"]},  # vast.ai's regions hold spaces and commas
    {"providers": "aws,lambda"}, {"tags": ["soc2", "eu.gdpr-1"]},
    {"packages": ["six==1.17.0", "numpy>=2", "pkg @ https://example.com/pkg.whl"]},
    {"image": "ghcr.io/org/trainer:1.4@sha256:" + "0" * 64},
])
def test_patterns_in_their_grammar_are_accepted(kwargs: dict[str, Any]) -> None:
    Compute(**kwargs)


# (case, path, what the message says): a job's workdir, a script, a TensorBoard directory
OUTSIDE = [
    ("climbs out", "../../etc", "points outside"),
    ("climbs out after a step in", "a/../../x", "points outside"),
    ("is the parent", "..", "points outside"),
    ("is absolute", "/etc", "is absolute"),
    ("holds a NUL", "src\x00", "NUL byte"),
]


@pytest.mark.parametrize(("path", "says"), [c[1:] for c in OUTSIDE], ids=[c[0] for c in OUTSIDE])
def test_a_path_that_leaves_its_root_is_refused(path: str, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        inside(path, field="workdir")
    assert refused.value.field == "workdir"
    assert says in refused.value.message
    assert "without .." in str(refused.value)


@pytest.mark.parametrize("path", ["", ".", "src/train", "a/../b", "./x", "a..b", "..x"])
def test_a_path_inside_its_root_is_kept_as_written(path: str) -> None:
    assert inside(path, field="workdir") == path


@pytest.mark.parametrize(("text", "at_most", "says"), [
    ("99999999d", 5 * 365 * 86400.0, "longer than the most allowed, 1825d"),
    ("5w", 86400.0, "write at most 1d"),
    ("101w", 100 * 7 * 86400.0, "at most 100w"),
    ("99999999999999999999w", None, "at most 36500d"),
])
def test_a_duration_longer_than_its_ceiling_is_refused(text: str, at_most: float | None,
                                                       says: str) -> None:
    bound = {} if at_most is None else {"at_most": at_most}
    with pytest.raises(InvalidInput) as refused:
        parse_duration(text, field="--expires", **bound)
    assert refused.value.field == "--expires"
    assert says in str(refused.value)


@pytest.mark.parametrize(("seconds", "text"), [
    (86400.0, "1d"), (5400.0, "90m"), (7 * 86400.0, "1w"), (1.5, "1.5s"), (3600.0, "1h")])
def test_durations_are_described_in_their_largest_whole_unit(seconds: float,
                                                             text: str) -> None:
    assert describe_duration(seconds) == text
