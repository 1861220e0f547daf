"""``nvidia-smi -q``: the human-readable query, an indented ``Key : Value`` tree.

The probe reads it when ``-q -x`` fails (see :mod:`bourse.agent.probe.gpus`); it is also what
providers paste and what several public captures hold. Section names drift like the XML's
("Clocks Throttle Reasons" -> "Clocks Event Reasons", "Power Readings" -> "GPU Power Readings"
-> R610's "GPU Power Readings / GPU Ceiling Power Limit", ECC "Double Bit / Total" ->
"SRAM/DRAM Uncorrectable" -> "SRAM Uncorrectable Parity/SEC-DED", "MIG devices / MIG Device"
-> R590's "MIG Device" straight under the GPU with "Shared FB Memory Usage"), so every lookup
names each spelling it accepts. Keys compare case-insensitively. R610 deprecates "Driver
Version" and "CUDA Version" for "KMD Version" and "CUDA UMD Version"; the new keys are read
first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bourse.agent.probe.reading import SmiReading, each_gpu, gpu, reading
from bourse.agent.probe.values import clean, flag, integer, number, total
from bourse.protocol.common import GpuInfo, MigInstance

_LINE = re.compile(r"^(?P<key>\S.*?)\s+:\s?(?P<value>.*)$")
_GPU_HEADER = re.compile(r"^GPU\s+(?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])$")


@dataclass(slots=True)
class Node:
    key: str
    value: str | None = None
    children: list[Node] = field(default_factory=list)

    def child(self, *keys: str) -> Node | None:
        """The first descendant along ``keys``; each step takes the first child so named."""
        node: Node | None = self
        for key in keys:
            if node is None:
                return None
            wanted = key.lower()
            node = next((c for c in node.children if c.key.lower() == wanted), None)
        return node

    def get(self, *keys: str) -> str | None:
        node = self.child(*keys)
        return clean(node.value) if node else None

    def first(self, *paths: tuple[str, ...]) -> str | None:
        for path in paths:
            value = self.get(*path)
            if value is not None:
                return value
        return None


def tree(text: str) -> Node:
    """The indentation tree of a ``-q`` report (a key with a value may still have children,
    as ``Process ID : 1234`` does)."""
    root = Node("")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for line in text.expandtabs(4).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("==="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        match = _LINE.match(stripped)
        node = Node(match["key"], match["value"]) if match else Node(stripped)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def parse_text(text: str) -> SmiReading:
    """The driver, CUDA version and GPUs of an ``nvidia-smi -q`` report."""
    root = tree(text)
    sections = [(m["bus"], n) for n in root.children if (m := _GPU_HEADER.match(n.key))]
    gpus, problems = each_gpu("nvidia-smi-text", sections, _gpu)
    return reading("nvidia-smi-text", root.first(("KMD Version",), ("Driver Version",)),
                   root.first(("CUDA UMD Version",), ("CUDA Version",)), gpus,
                   attached=root.get("Attached GPUs"), problems=problems)


def _gpu(index: int, section: tuple[str, Node]) -> GpuInfo:
    bus, g = section
    link = ("PCI", "GPU Link Info")
    return gpu(
        g.get("Product Name"), integer(g.get("FB Memory Usage", "Total")),
        uuid=g.get("GPU UUID"), index=index, pci_bus_id=bus,
        pcie_gen_current=integer(g.get(*link, "PCIe Generation", "Current")),
        pcie_gen_max=integer(g.get(*link, "PCIe Generation", "Max")),
        pcie_width_current=integer(g.get(*link, "Link Width", "Current")),
        pcie_width_max=integer(g.get(*link, "Link Width", "Max")),
        mig_enabled=flag(g.get("MIG Mode", "Current")),
        mig_pending=flag(g.get("MIG Mode", "Pending")),
        mig_instances=_migs(g),
        ecc_enabled=flag(g.get("ECC Mode", "Current")),
        ecc_uncorrectable_volatile=_uncorrectable(g.child("ECC Errors", "Volatile")),
        ecc_uncorrectable_aggregate=_uncorrectable(g.child("ECC Errors", "Aggregate")),
        remapped_rows_uncorrectable=integer(g.get("Remapped Rows", "Uncorrectable Error")),
        remapped_rows_pending=flag(g.get("Remapped Rows", "Pending")),
        remapped_rows_failure=flag(g.get("Remapped Rows", "Remapping Failure Occurred")),
        retired_pages=total(integer(g.get("Retired Pages", "Single Bit ECC")),
                            integer(g.get("Retired Pages", "Double Bit ECC"))),
        retired_pages_pending=flag(g.first(("Retired Pages", "Pending Page Blacklist"),
                                           ("Retired Pages", "Pending"))),
        power_limit_w=number(_power(g, "Current Power Limit", "Power Limit")),
        power_default_limit_w=number(_power(g, "Default Power Limit")),
        clock_event_reasons=_reasons(g),
    )


_POWER_SECTIONS = (("GPU Power Readings", "GPU Ceiling Power Limit"), ("GPU Power Readings",),
                   ("Power Readings",))


def _power(g: Node, *keys: str) -> str | None:
    return g.first(*((*section, key) for section in _POWER_SECTIONS for key in keys))


def _uncorrectable(block: Node | None) -> int | None:
    if block is None:
        return None
    counts = [integer(c.value) for c in block.children if "uncorrectable" in c.key.lower()]
    counts.append(integer(block.get("Double Bit", "Total")))
    return total(*counts)


def _reasons(g: Node) -> list[str]:
    block = g.child("Clocks Event Reasons") or g.child("Clocks Throttle Reasons")
    if block is None:
        return []
    names = [n.key.lower().replace(" ", "_") for n in _walk(block) if flag(n.value)]
    return [n for n in names if "idle" not in n]


def _walk(node: Node) -> list[Node]:
    """Every node below ``node``, depth first (a loop: the depth is the input's to choose)."""
    found: list[Node] = []
    stack = list(reversed(node.children))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(reversed(child.children))
    return found


def _migs(g: Node) -> list[MigInstance]:
    parent = g.child("MIG devices") or g
    devices = [c for c in parent.children if c.key.lower() == "mig device"]
    return [MigInstance(
        index=integer(d.get("Index")),
        gpu_instance_id=integer(d.get("GPU Instance ID")),
        compute_instance_id=integer(d.get("Compute Instance ID")),
        memory_mib=integer(d.first(("FB Memory Usage", "Total"),
                                   ("Shared FB Memory Usage", "Total"))),
        multiprocessors=integer(d.get("Device Attributes", "Shared", "Multiprocessor count")),
    ) for d in devices]
