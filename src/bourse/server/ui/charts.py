"""The job page's metrics charts (a JSON feed uPlot draws) and the nodes page's utilisation.

The feed answers columns, as uPlot takes them: times and one array per series, ``null`` where
a sample lacks the measure (uPlot leaves a gap). A job's chart shows its process tree's CPU
(100 % is one core) and its GPUs' mean utilisation, then its memory and its GPUs' memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from starlette.responses import Response

from bourse.core.states import JobState
from bourse.protocol.metrics import SampleView
from bourse.server.services import jobs, metrics
from bourse.server.services.specs import spec_of
from bourse.server.ui.guard import Ctx, member_rank, path_id
from bourse.server.ui.render import json_response

CHART_SAMPLES = 5000
MIB = 2**20
Column = list[float | None]


def columns(samples: Sequence[SampleView]) -> dict[str, Column]:
    """uPlot's data: ``t`` (seconds) and one column per series."""
    return {
        "t": [s.time for s in samples],
        "cpu": [_round(s.cpu_percent) for s in samples],
        "gpu": [_round(_mean(g.utilization_percent for g in s.gpus)) for s in samples],
        "memory_mib": [_mib(s.memory_bytes) for s in samples],
        "gpu_memory_mib": [_round(_sum(g.memory_used_mib for g in s.gpus)) for s in samples],
    }


def usage(sample: SampleView | None) -> str:
    """A node's last sample in a few words: "CPU 180 % · memory 3.0 / 8.0 GiB · GPU 97 %"."""
    if sample is None:
        return "-"
    parts = []
    if sample.cpu_percent is not None:
        parts.append(f"CPU {sample.cpu_percent:.0f} %")
    if sample.memory_bytes is not None and sample.memory_total_bytes:
        parts.append(f"memory {sample.memory_bytes / 2**30:.1f} / "
                     f"{sample.memory_total_bytes / 2**30:.1f} GiB")
    gpu = _mean(g.utilization_percent for g in sample.gpus)
    if gpu is not None:
        parts.append(f"GPU {gpu:.0f} %")
    return " · ".join(parts) or "-"


def _present(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _mean(values: Iterable[float | None]) -> float | None:
    found = _present(values)
    return sum(found) / len(found) if found else None


def _sum(values: Iterable[float | None]) -> float | None:
    found = _present(values)
    return sum(found) if found else None


def _mib(value: int | None) -> float | None:
    return None if value is None else round(value / MIB, 1)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


async def job_metrics(ctx: Ctx) -> Response:
    """The chart's feed; ``done`` once the job has ended (no more samples will come)."""
    job_id = path_id(ctx, "job_id")
    rank = member_rank(ctx)
    async with ctx.state.db.read() as session:
        job = await jobs.get_member(session, job_id, ctx.scope, rank)
        if rank is None and spec_of(job).compute.num_nodes > 1:
            rank = 0  # one member's samples make a chart; several would zigzag between them
        samples = await metrics.job_metrics(session, job_id, 0.0, CHART_SAMPLES, rank)
    return json_response({**columns(samples), "stalled": jobs.stalled_in(job),
                          "done": JobState(job.state).terminal})


async def node_usage(ctx: Ctx, node_ids: Sequence[str]) -> dict[str, str]:
    async with ctx.state.db.read() as session:
        latest = await metrics.latest_node_samples(session, node_ids)
    return {node_id: usage(latest.get(node_id)) for node_id in node_ids}
