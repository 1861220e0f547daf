"""The hardware fingerprint: a SHA-256 of what identifies this machine.

Identity is the GPUs' UUIDs (sorted: enumeration order may change between boots), the CPU
model, the memory size rounded to whole GiB (the kernel's total moves by a few MiB with
reservations and firmware updates) and the machine id. It changes when a GPU is swapped, memory
is added or the OS is reinstalled — each of which sends a node back through verification — and
not across reboots, driver updates or MIG reconfiguration (MIG devices have UUIDs of their own
that are left out). The machine id itself never leaves the node: only the hash does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from bourse.protocol.common import GpuInfo

MACHINE_ID_PATHS = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


def gpu_identity(gpu: GpuInfo) -> str:
    """A GPU's UUID, or its bus id and name when the source showed no UUID (the table)."""
    return gpu.uuid or f"{gpu.pci_bus_id or gpu.index}:{gpu.name}"


def fingerprint(gpus: Iterable[str], cpu_model: str, memory_mib: int,
                machine_id: str | None) -> str:
    identity = {
        "v": 1, "gpus": sorted(gpus), "cpu": cpu_model.strip(),
        "memory_gib": round(memory_mib / 1024), "machine": (machine_id or "").strip(),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def machine_id(paths: Iterable[Path] = MACHINE_ID_PATHS) -> str | None:
    for path in paths:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text:
            return text
    return None
