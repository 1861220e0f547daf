"""A pending reason as the table it is: the matcher's own explanation, parsed back; tables of
cases, no server."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bourse.core.compute import Compute
from bourse.core.match import explain
from bourse.core.offer import Offer
from bourse.server.ui import reasons
from bourse.server.ui.reasons import NEAREST_HEADERS, REMOVED_HEADERS, Part

NODE = Offer(id="n-a100", provider="node", instance_type="gpu-box", region="local",
             gpu="a100-40gb", gpu_count=1, gpu_memory_mib=40960, cpus=8, memory_gib=64,
             price=2.0, divisible=True, node_id="n-a100", source="node")
OFFERS = [NODE, replace(NODE, id="n-t4", instance_type="t4-box", gpu="t4",
                        gpu_memory_mib=15360, cpus=4),
          replace(NODE, id="n-cpu", instance_type="cpu-box", gpu=None, gpu_count=0,
                  gpu_memory_mib=None, cpus=2)]


def explained(compute: Compute) -> str:
    """What placement stores for a job that waits: the explanation's lines, one per line."""
    return "\n".join(explain(compute, OFFERS, nearest=3).lines())


def test_the_matchers_explanation_becomes_its_tables() -> None:
    compute = Compute("a100-40gb:2", cpus=4)
    found = reasons.parts(explained(compute))
    assert found[0] == Part(text="3 offers considered for a100-40gb:2, cpus 4+")
    removed = next(p for p in found if p.headers == REMOVED_HEADERS)
    assert removed.rows == (("gpu", "2", "1"), ("gpu_count", "1", "0"))
    assert removed.numbers == (1, 2)
    assert Part(text="0 matched") in found
    nearest = found[-1]
    assert (nearest.text, nearest.headers) == ("nearest rejected offers:", NEAREST_HEADERS)
    assert nearest.rows == tuple(
        (r.offer.id, "; ".join(reason for _, reason in r.lacks))
        for r in explain(compute, OFFERS, nearest=3).nearest)
    assert [row[0] for row in nearest.rows] == ["n-a100", "n-t4", "n-cpu"]


def test_lines_stripped_of_their_indent_still_make_the_tables() -> None:
    text = "\n".join(line.strip() for line in explained(Compute("a100-40gb:2")).splitlines())
    assert reasons.parts(text) == reasons.parts(explained(Compute("a100-40gb:2")))


@pytest.mark.parametrize("reason", [None, "", "every connected node is busy",
                                    "no verified node is connected\n"])
def test_a_reason_of_one_line_is_shown_as_it_is(reason: str | None) -> None:
    assert reasons.parts(reason) == []


@pytest.mark.parametrize(("reason", "first"), [
    (None, ""), ("", ""), ("every connected node is busy", "every connected node is busy"),
    ("3 offers considered for h100\n  gpu  removed 3  (0 left)\n0 matched",
     "3 offers considered for h100"),
])
def test_a_list_shows_the_first_line(reason: str | None, first: str) -> None:
    assert reasons.first_line(reason) == first
