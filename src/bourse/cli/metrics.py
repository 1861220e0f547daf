"""``bourse jobs metrics ID``: a job's resource samples as a table (or JSON)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import click

from bourse.cli import complete
from bourse.cli.errors import handles_errors
from bourse.cli.render import echo_json, table
from bourse.protocol.metrics import MetricsView, SampleView

HEADERS = ("TIME", "#", "CPU %", "MEMORY", "PROCS", "GPU %", "GPU MEM", "POWER", "TEMP", "WORK")


@click.command("metrics")
@click.argument("job_id", shell_complete=complete.job_ids)
@click.option("--last", type=click.IntRange(1, 50_000), default=20, show_default=True,
              help="How many of the newest samples to show.")
@click.option("--rank", type=click.IntRange(min=0), help="One member of a multi-node job.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def metrics(job_id: str, last: int, rank: int | None, as_json: bool) -> None:
    """A job's CPU, memory, GPU and disk use over time, and whether it is stalled."""
    from bourse.cli.client import open_client  # the CLI's one client seam (tests replace it)

    with open_client() as client:
        found = client.job_metrics(job_id, limit=last, rank=rank)
    if as_json:
        echo_json(found)
        return
    click.echo("\n".join(describe_metrics(found)))


def describe_metrics(found: MetricsView) -> list[str]:
    lines = []
    if found.stalled is not None:
        lines += [f"STALLED: {found.stalled.message}", ""]
    if not found.samples:
        return [*lines, "no samples yet (the job's node sends them while it runs)"]
    gang = any(s.rank for s in found.samples)  # a gang's: attempt.rank
    rows = [sample_row(s, gang) for s in found.samples]
    return [*lines, table(HEADERS, rows, right=tuple(range(1, len(HEADERS))))]


def sample_row(s: SampleView, gang: bool = False) -> list[str]:
    stamp = datetime.fromtimestamp(s.time).strftime("%H:%M:%S")
    number = str(s.attempt or "-") + (f".{s.rank or 0}" if gang and s.attempt else "")
    return [stamp + (" ~1m" if s.period_s else ""), number,
            _num(s.cpu_percent, "{:.0f}"), size(s.memory_bytes),
            "-" if s.processes is None else str(s.processes),
            _num(_mean(g.utilization_percent for g in s.gpus), "{:.0f}"),
            _gpu_memory(s), _num(_sum(g.power_w for g in s.gpus), "{:.0f} W"),
            _num(_max(g.temperature_c for g in s.gpus), "{:.0f} C"), size(s.work_bytes)]


def _gpu_memory(s: SampleView) -> str:
    used = _sum(g.memory_used_mib for g in s.gpus)
    return "-" if used is None else size(int(used * 2**20))


def _present(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _sum(values: Iterable[float | None]) -> float | None:
    present = _present(values)
    return sum(present) if present else None


def _mean(values: Iterable[float | None]) -> float | None:
    present = _present(values)
    return sum(present) / len(present) if present else None


def _max(values: Iterable[float | None]) -> float | None:
    present = _present(values)
    return max(present) if present else None


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def size(value: int | None) -> str:
    """Bytes in binary units: 512 B, 3.2 MiB, 1.5 GiB."""
    if value is None:
        return "-"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TiB"
