"""The probe's shell: gathers GPUs, host facts, fingerprint and local checks into one report.

:func:`probe` is the fast part the agent sends in its hello (``Capabilities``); :func:`run_probe`
adds the slow parts (tools, torch, storage and compute checks) for ``bourse agent probe`` and
for verification.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bourse import __version__
from bourse.agent.probe.benchmark import cpu_matmul, gpu_matmul
from bourse.agent.probe.fingerprint import fingerprint, gpu_identity, machine_id
from bourse.agent.probe.gpus import GpuProbe, probe_gpus
from bourse.agent.probe.host import engines_on_path, host_info
from bourse.agent.probe.storage import check_storage
from bourse.protocol.common import Benchmark, Capabilities, HostInfo, ProbeReport


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    work_dir: Path
    storage_mb: int = 100
    checks: bool = True  # storage and compute checks
    python: str = sys.executable  # the interpreter jobs run with: its torch is the one that counts
    cpu_budget_s: float = 1.0
    nvml: Any = None  # the NVML module (pynvml by default)


def _fingerprint(found: GpuProbe, host: HostInfo, machine: str | None) -> str:
    return fingerprint((gpu_identity(g) for g in found.reading.gpus), host.cpu_model,
                       host.memory_mib, machine)


def run_probe(options: ProbeOptions) -> ProbeReport:
    """Everything ``bourse agent probe`` measures (no judgement: see core.verification)."""
    started = time.monotonic()
    found = probe_gpus(nvml=options.nvml)
    host = host_info(options.work_dir, python=options.python, gpus=bool(found.reading.gpus))
    machine = machine_id()
    host = host.model_copy(update={"machine_id": machine is not None})
    report = ProbeReport(
        probed_at=time.time(), source=found.reading.source, driver=found.reading.driver,
        cuda=found.reading.cuda, gpus=list(found.reading.gpus), gpu_errors=list(found.errors),
        gpu_partial=found.partial, host=host, fingerprint=_fingerprint(found, host, machine),
        agent_version=__version__)
    checks_started = time.monotonic()
    if options.checks:
        report = report.model_copy(update={
            "storage": check_storage(options.work_dir, options.storage_mb),
            "benchmarks": _benchmarks(options, host)})
    done = time.monotonic()
    return report.model_copy(update={"duration_s": round(done - started, 3),
                                     "checks_s": round(done - checks_started, 3)})


def _benchmarks(options: ProbeOptions, host: HostInfo) -> list[Benchmark]:
    found = [cpu_matmul(options.cpu_budget_s)]
    if host.torch is not None and host.torch.cuda_available:
        found += gpu_matmul(options.python)
    return found


def probe(work_dir: Path, cpus: int | None = None) -> Capabilities:
    """What the agent's hello carries: GPUs, host basics, CUDA and the fingerprint (fast)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    found = probe_gpus()
    host = host_info(work_dir, deep=False)
    return Capabilities(
        hostname=host.hostname, cpus=cpus or os.cpu_count() or 1, cpu_model=host.cpu_model,
        memory_gib=round(host.memory_mib / 1024, 2), disk_free_gib=host.disk_free_gib,
        gpus=list(found.reading.gpus), driver=found.reading.driver, os=host.os,
        python=host.python, agent_version=__version__, cuda=found.reading.cuda,
        fingerprint=_fingerprint(found, host, machine_id()), engines=engines_on_path(),
    )
