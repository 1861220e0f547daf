"""``bourse agent``: run a node agent in the foreground; ``bourse agent probe``: check this
machine without joining an exchange."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
import time
from pathlib import Path

import click

from bourse.agent.daemon import AgentConfig, run_agent
from bourse.agent.probe import ProbeOptions, run_probe
from bourse.cli.errors import EXIT_NO_RESULT, EXIT_OK, handles_errors
from bourse.cli.render import echo_json, table
from bourse.core.verification import verify
from bourse.protocol.common import Declared, GpuInfo, ProbeReport, VerificationReport


@click.group(invoke_without_command=True)
@click.option("--server", help="The coordinator's URL, e.g. http://10.0.0.5:8470.")
@click.option("--token", help="One-time enrolment token (`bourse nodes enroll`); not needed "
              "once the node is enrolled.")
@click.option("--name", default=socket.gethostname(), show_default=True,
              help="Name shown for this node.")
@click.option("--keep-alive", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="Seconds between heartbeats and WebSocket pings: keep it below the idle "
                   "timeout of any load balancer or NAT on the way.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("~/.bourse/agent"),
              show_default=True, help="Jobs, logs, the spool and the node credential live here.")
@click.option("--cpus", type=click.IntRange(min=1), help="CPUs to offer (default: all).")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@click.pass_context
@handles_errors
def agent(ctx: click.Context, server: str | None, token: str | None, name: str,
          keep_alive: float, work_dir: Path, cpus: int | None, log_level: str) -> None:
    """Run a node agent: it dials out to the coordinator and runs the jobs placed here."""
    if ctx.invoked_subcommand is not None:
        return
    if not server:
        raise click.UsageError("--server is required, e.g. --server http://127.0.0.1:8470")
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise click.BadParameter("use letters, digits, '-', '_' and '.'", param_hint="--name")
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = AgentConfig(server=server.rstrip("/"), work_dir=work_dir.expanduser(), name=name,
                         token=token, keep_alive_s=keep_alive, cpus=cpus)
    asyncio.run(run_agent(config))


@agent.command("probe")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("~/.bourse/agent"),
              show_default=True, help="Where the storage check writes (the agent's work dir).")
@click.option("--storage-mb", type=click.IntRange(min=1, max=100_000), default=100,
              show_default=True, help="MB to write, fsync and read back in the work dir.")
@click.option("--skip-checks", is_flag=True, help="Only probe: no storage or compute checks.")
@click.option("--declared-gpus", metavar="LABEL",
              help="GPUs the provider declares, e.g. a100-80gb:8; checked against the probe.")
@click.option("--declared-cpus", type=click.IntRange(min=1), help="CPUs declared.")
@click.option("--declared-memory", type=click.FloatRange(min=0), metavar="GIB",
              help="Memory declared, in GiB.")
@handles_errors
def probe_command(as_json: bool, work_dir: Path, storage_mb: int, skip_checks: bool,
                  declared_gpus: str | None, declared_cpus: int | None,
                  declared_memory: float | None) -> None:
    """Probe this machine and run the local checks, without joining an exchange.

    What a provider runs before registering a machine: GPUs, host, checks with pass/warn/fail
    and reasons, and the hardware fingerprint. Exit 0 when no check failed, 1 when one did,
    2 on bad input.
    """
    declared = Declared(gpus=declared_gpus, cpus=declared_cpus, memory_gib=declared_memory)
    any_declared = declared_gpus or declared_cpus or declared_memory is not None
    started = time.monotonic()
    report = run_probe(ProbeOptions(work_dir=work_dir.expanduser(), storage_mb=storage_mb,
                                    checks=not skip_checks))
    verification = verify(report, declared if any_declared else None)
    elapsed = time.monotonic() - started
    if as_json:
        echo_json({"report": report, "verification": verification,
                   "seconds": round(elapsed, 3)})
    else:
        click.echo(render_probe(report, verification, elapsed))
    sys.exit(EXIT_NO_RESULT if verification.status == "fail" else EXIT_OK)


def _gpu_row(g: GpuInfo) -> list[str]:
    pcie = (f"gen{g.pcie_gen_current or '?'}/{g.pcie_gen_max or '?'} "
            f"x{g.pcie_width_current or '?'}/{g.pcie_width_max or '?'}")
    mig = "-" if g.mig_enabled is None else (
        f"on ({len(g.mig_instances)})" if g.mig_enabled else "off")
    ecc = "-" if g.ecc_enabled is None else ("on" if g.ecc_enabled else "off")
    return [str(g.index), g.model or "?", g.name, f"{g.memory_mib or '?'} MiB",
            g.compute_capability or "-", pcie, mig, ecc, g.uuid or "-"]


def _host_lines(report: ProbeReport) -> list[str]:
    h = report.host
    torch = "absent" if h.torch is None else (
        f"{h.torch.version} (CUDA {h.torch.cuda}, {h.torch.device_count} GPUs visible)"
        if h.torch.cuda else f"{h.torch.version} (CPU build)")
    tools = ", ".join(f"{t.name} {t.version or '?'}" for t in h.tools) or "none found"
    return [
        f"  CPU        {h.cpu_model} ({h.cpu_physical_cores or '?'} cores, "
        f"{h.cpu_logical_cores} threads) {' '.join(h.cpu_flags)}",
        f"  memory     {h.memory_mib / 1024:.1f} GiB",
        f"  disk       {h.disk_free_gib:.1f} GiB free under {h.work_dir}",
        f"  OS         {h.os}, kernel {h.kernel}, {h.arch}, Python {h.python}",
        f"  tools      {tools}",
        f"  torch      {torch}",
    ]


def render_probe(report: ProbeReport, verification: VerificationReport, elapsed: float) -> str:
    """The readable report: GPUs, host, checks, notes, offers, fingerprint, timing."""
    head = (f"GPUs: none found (source: {report.source})" if not report.gpus else
            f"GPUs (source: {report.source}, driver {report.driver}, CUDA {report.cuda})")
    lines = [head]
    if report.gpus:
        rows = [_gpu_row(g) for g in report.gpus]
        headers = ("#", "MODEL", "NAME", "MEMORY", "CC", "PCIE", "MIG", "ECC", "UUID")
        lines += ["  " + line for line in table(headers, rows).splitlines()]
    lines += ["", "Host", *_host_lines(report), "", "Checks"]
    lines += [f"  {c.status.upper():4}  {c.name:20}  {c.reason}" for c in verification.checks]
    for title, items in (("Compatibility", verification.notes), ("Offers", verification.offers)):
        lines += ["", title, *(f"  {item}" for item in items)] if items else []
    failed = sum(c.status == "fail" for c in verification.checks)
    warned = sum(c.status == "warn" for c in verification.checks)
    lines += ["", f"Fingerprint  {report.fingerprint}",
              f"Result       {verification.status.upper()} ({failed} failed, {warned} warnings)",
              f"Time         probe {report.duration_s - report.checks_s:.2f} s + checks "
              f"{report.checks_s:.2f} s + verification = {elapsed:.2f} s"]
    return "\n".join(lines)
