"""Plain ``nvidia-smi``: the summary table, for what it shows.

It shows the driver and the CUDA version (which the CSV query lacks; R610 calls them "KMD
Version" and "CUDA UMD Version"), per GPU the index, name (cut to fit, ending in "..."),
memory, power cap, volatile uncorrectable ECC count and MIG mode, and the MIG devices table.
The probe reads it after the CSV query (for the CUDA version and MIG devices) and as the last
nvidia-smi source.
"""

from __future__ import annotations

import re
from collections import defaultdict

from bourse.agent.probe.reading import SmiReading, each_gpu, gpu, reading
from bourse.agent.probe.values import clean, flag, integer, number
from bourse.protocol.common import GpuInfo, MigInstance

# R610 renamed both header fields: "KMD Version: 610.57.04   CUDA UMD Version: 13.3". The KMD
# (kernel-mode driver) is the driver: under WSL it is the Windows one, while "NVIDIA-SMI
# 615.71.08" names the Linux user-mode tool.
_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(\S+)")
_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\S+)")
_NAME_CELL = re.compile(r"^(?P<index>\d+)\s+(?P<name>.*?)(?:\s+(?:On|Off|WDDM|TCC|MCDM))?$")
_MIG_IDS = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$")
_TOTAL = re.compile(r"/\s*(\d+)\s*MiB")


def parse_table(text: str) -> SmiReading:
    """The driver, CUDA version and GPUs (with MIG devices) of plain ``nvidia-smi``."""
    migs = _mig_devices(text)
    blocks = [(b, migs.get(i, [])) for b in _blocks(text) if (i := _index(b)) is not None]
    gpus, problems = each_gpu("nvidia-smi-table", blocks, _gpu)
    driver, cuda = _DRIVER.search(text), _CUDA.search(text)
    return reading("nvidia-smi-table", driver.group(1) if driver else None,
                   cuda.group(1) if cuda else None, gpus, problems=problems)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _blocks(text: str) -> list[list[list[str]]]:
    """The GPU rows of the first table: lines between ``+---`` separators, split into cells."""
    blocks: list[list[list[str]]] = []
    current: list[list[str]] = []
    started = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("|==="):
            started = True
        elif started and (not stripped or stripped.startswith("+")):
            if current:
                blocks.append(current)
            current = []
            if not stripped:
                break  # the GPU table ends at its blank line
        elif started and stripped.startswith("|"):
            current.append(_cells(stripped))
    return blocks


def _index(block: list[list[str]]) -> int | None:
    match = _NAME_CELL.match(block[0][0]) if block and block[0] else None
    return integer(match["index"]) if match else None


def _gpu(_: int, gpu_block: tuple[list[list[str]], list[MigInstance]]) -> GpuInfo:
    block, migs = gpu_block
    first = block[0]
    match = _NAME_CELL.match(first[0])
    assert match is not None
    second = block[1] if len(block) > 1 else []
    third = block[2] if len(block) > 2 else []
    memory = _TOTAL.search(second[1]) if len(second) > 1 else None
    power = second[0].rsplit("/", 1)[1] if second and "/" in second[0] else None
    ecc = clean(first[2]) if len(first) > 2 else None
    return gpu(
        match["name"], integer(memory.group(1)) if memory else None,
        index=integer(match["index"]), pci_bus_id=_bus_id(first),
        power_limit_w=number(power),
        ecc_uncorrectable_volatile=integer(ecc) if ecc and ecc.isdigit() else None,
        mig_enabled=flag(third[2]) if len(third) > 2 else None,
        mig_instances=migs,
    )


def _bus_id(first: list[str]) -> str | None:
    return clean(first[1].split()[0]) if len(first) > 1 and first[1] else None


def _mig_devices(text: str) -> dict[int, list[MigInstance]]:
    """``| GPU GI CI MIG | used / total MiB | SM Unc.ECC | ...`` rows, by GPU index."""
    section = text.split("MIG devices:", 1)
    if len(section) < 2:
        return {}
    found: dict[int, list[MigInstance]] = defaultdict(list)
    for line in section[1].split("Processes:", 1)[0].splitlines():
        cells = _cells(line) if line.strip().startswith("|") else []
        ids = _MIG_IDS.match(cells[0]) if len(cells) > 2 else None
        gpu_index, gi, ci, dev = (integer(g) for g in ids.groups()) if ids else (None,) * 4
        if gpu_index is None:
            continue
        memory = _TOTAL.search(cells[1])
        found[gpu_index].append(MigInstance(
            gpu_instance_id=gi, compute_instance_id=ci, index=dev,
            memory_mib=integer(memory.group(1)) if memory else None,
            multiprocessors=integer(cells[2].split()[0]) if cells[2] else None))
    return dict(found)
