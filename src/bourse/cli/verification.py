"""Probe and verification reports as text (``bourse agent probe``, ``bourse nodes show``)."""

from __future__ import annotations

from bourse.cli.render import table
from bourse.protocol.common import GpuInfo, ProbeReport, VerificationReport


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


def render_probe(report: ProbeReport, verification: VerificationReport,
                 elapsed: float | None = None) -> str:
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
              f"{report.checks_s:.2f} s" + (f" + verification = {elapsed:.2f} s"
                                             if elapsed is not None else "")]
    return "\n".join(lines)
