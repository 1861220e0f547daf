"""What this machine is: CPU, memory, disk, OS and GPUs (through nvidia-smi when present).

A first probe, enough to place work; the trusted-node issue deepens it (NVML, XML, PCIe, ECC,
fingerprints, verification).
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from bourse import __version__
from bourse.core.errors import UnknownGpu
from bourse.core.gpus import catalogue
from bourse.protocol.common import Capabilities, GpuInfo

_QUERY = "name,memory.total,uuid,driver_version"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def parse_query_gpu(text: str) -> tuple[list[GpuInfo], str | None]:
    """GPUs from ``nvidia-smi --query-gpu=name,memory.total,uuid,driver_version
    --format=csv,noheader,nounits``; returns them and the driver version."""
    gpus, driver = [], None
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        name, memory, uuid, driver = parts[0], parts[1], parts[2], parts[3]
        mib = int(float(memory)) if memory.replace(".", "", 1).isdigit() else None
        try:
            model: str | None = catalogue().identify(name, mib).id
        except UnknownGpu:
            model = None
        gpus.append(GpuInfo(model=model, name=name, memory_mib=mib, uuid=uuid))
    return gpus, driver


def probe_gpus() -> tuple[list[GpuInfo], str | None]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], None
    try:
        out = subprocess.run([smi, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return [], None
    return parse_query_gpu(out)


def probe(work_dir: Path, cpus: int | None = None) -> Capabilities:
    work_dir.mkdir(parents=True, exist_ok=True)
    gpus, driver = probe_gpus()
    return Capabilities(
        hostname=socket.gethostname(), cpus=cpus or os.cpu_count() or 1, cpu_model=cpu_model(),
        memory_gib=round(psutil.virtual_memory().total / 2**30, 2),
        disk_free_gib=round(shutil.disk_usage(work_dir).free / 2**30, 2),
        gpus=gpus, driver=driver, os=platform.platform(), python=sys.version.split()[0],
        agent_version=__version__,
    )
