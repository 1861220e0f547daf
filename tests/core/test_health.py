"""Stall and disk judgements, from tables of samples."""

from __future__ import annotations

import pytest

from bourse.core.health import Reading, StallRules, assess, disk_message, filling_disks

RULES = StallRules(after_s=60.0, cpu_percent=2.0, gpu_percent=5.0)


def series(cpu: list[float | None], gpus: list[tuple[float, ...]] | None = None,
           step: float = 10.0) -> list[Reading]:
    gpus = gpus or [()] * len(cpu)
    return [Reading(1000.0 + i * step, c, g) for i, (c, g) in enumerate(zip(cpu, gpus,
                                                                            strict=True))]


IDLE_CPU = [0.1] * 8  # 70 s of samples, 10 s apart
BUSY_GPU = [(97.0, 88.0)] * 8
IDLE_GPU = [(0.0, 3.0)] * 8


@pytest.mark.parametrize(("readings", "last_output", "kind"), [
    (series(IDLE_CPU), None, "no_progress"),
    (series(IDLE_CPU), 1000.0, "no_progress"),  # its last line is older than the window
    (series(IDLE_CPU), 1065.0, None),  # it printed inside the window
    (series([0.1] * 7 + [50.0]), None, None),  # computing in the last sample clears it
    (series([0.1, 0.1, 90.0, 0.1, 0.1, 0.1, 0.1, 0.1]), None, None),  # busy inside the window
    (series([0.1] * 6), None, None),  # watched for 50 s only
    (series([None] * 8), None, None),  # CPU unknown: no verdict on it
    (series([100.0] * 8, IDLE_GPU), 1065.0, "gpu_idle"),  # busy CPU, printing, idle GPUs
    (series([100.0] * 8, BUSY_GPU), None, None),
    (series([0.1] * 8, BUSY_GPU), None, None),  # a GPU kernel needs no host CPU
    (series([0.1] * 8, [(1.0,)] * 7 + [(60.0,)]), None, None),
    (series([0.1] * 8, [(1.0,)] * 4 + [()] * 4), None, "no_progress"),  # GPUs released
    ([], None, None),
])
def test_assess(readings: list[Reading], last_output: float | None, kind: str | None) -> None:
    found = assess(readings, last_output, RULES)
    assert (found.kind if found else None) == kind


def test_the_evidence_says_what_was_seen() -> None:
    found = assess(series([0.4] * 8, IDLE_GPU), None, RULES)
    assert found is not None and found.kind == "gpu_idle"
    assert found.since == 1010.0 and found.evidence["max_gpu_percent"] == 3.0
    assert "sat idle for 60 s" in found.message
    quiet = assess(series(IDLE_CPU), 900.0, RULES)
    assert quiet is not None and "printed nothing for 3 min" in quiet.message
    assert quiet.evidence["max_cpu_percent"] == 0.1


def test_rules_are_validated() -> None:
    with pytest.raises(ValueError, match="invalid stall rules"):
        StallRules(after_s=0)


GIB = 2**30


@pytest.mark.parametrize(("previous", "current", "warned"), [
    ([], [("work dir", 96 * GIB, 100 * GIB)], ["work dir"]),
    ([("work dir", 95 * GIB, 100 * GIB)], [("work dir", 99 * GIB, 100 * GIB)], []),  # once
    ([("work dir", 90 * GIB, 100 * GIB)], [("work dir", 95 * GIB, 100 * GIB)], ["work dir"]),
    ([("cache", 99 * GIB, 100 * GIB)], [("work dir", 99 * GIB, 100 * GIB)], ["work dir"]),
    ([], [("work dir", 10 * GIB, 100 * GIB), ("cache", 1, 0)], []),
])
def test_filling_disks(previous: list[tuple[str, int, int]], current: list[tuple[str, int, int]],
                       warned: list[str]) -> None:
    assert [d[0] for d in filling_disks(previous, current, 0.95)] == warned


def test_disk_message() -> None:
    assert disk_message(("work dir and cache", 97 * GIB, 100 * GIB)) == (
        "the disk of the node's work dir and cache is 97% full (3.0 GiB free of 100.0 GiB)")
