"""``nvidia-smi --query-gpu=<fields> --format=csv``: one row per GPU, read by header name.

Columns are found by their header ("memory.total [MiB]" is ``memory.total``), so any field list
parses, including captures that lack a name or a driver column. Units stay in the values
("143771 MiB") and are dropped by :func:`~bourse.agent.probe.values.number`; with
``--format=csv,nounits`` they are in the header only ("16280"). A capture without
``memory.total`` but with ``memory.used`` and ``memory.free`` (netdata asks for those) gets
their sum, plus ``memory.reserved`` where listed: that is how nvidia-smi's Total is made, to
within a MiB of rounding.

The CSV carries no CUDA version: the probe reads it from the plain table, else derives it from
the driver.
"""

from __future__ import annotations

import csv
import io
import re

from bourse.agent.probe.reading import SmiOutputError, SmiReading, each_gpu, gpu, reading
from bourse.agent.probe.values import clean, flag, integer, number, total
from bourse.protocol.common import GpuInfo

# What the probe asks for. Old drivers reject fields they do not know ("compute_cap" came with
# R510, "remapped_rows.*" with R460): the probe drops the ones nvidia-smi names and asks again.
QUERY_FIELDS = (
    "index", "name", "uuid", "pci.bus_id", "driver_version", "memory.total", "compute_cap",
    "pcie.link.gen.gpucurrent", "pcie.link.gen.current", "pcie.link.gen.max",
    "pcie.link.width.current", "pcie.link.width.max", "mig.mode.current", "mig.mode.pending",
    "ecc.mode.current", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total", "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count", "retired_pages.pending", "remapped_rows.uncorrectable",
    "remapped_rows.pending", "remapped_rows.failure", "power.limit", "power.default_limit",
    "clocks_event_reasons.sw_power_cap", "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown", "clocks_event_reasons.sw_thermal_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown",
)
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
_LEGACY = "name,memory.total,uuid,driver_version"


def invalid_fields(stderr_or_stdout: str) -> list[str]:
    """The fields an nvidia-smi error message rejects."""
    return _INVALID_FIELD.findall(stderr_or_stdout)


def parse_csv(text: str) -> SmiReading:
    """GPUs from ``--query-gpu=... --format=csv`` output (with its header line)."""
    rows = _rows(text)
    if not rows:
        return reading("nvidia-smi-csv", None, None, [])
    names = [_field(cell) for cell in rows[0]]
    records = [dict(zip(names, (c.strip() for c in row), strict=False)) for row in rows[1:]]
    driver = next((r.get("driver_version") for r in records if r.get("driver_version")), None)
    gpus, problems = each_gpu("nvidia-smi-csv", records, _gpu)
    return reading("nvidia-smi-csv", driver, None, gpus, problems=problems)


def _rows(text: str) -> list[list[str]]:
    """The CSV's rows; carriage returns (Windows line ends of a copied capture) are dropped."""
    lines = io.StringIO(text.strip().replace("\r", ""))
    try:
        return [row for row in csv.reader(lines) if row]
    except csv.Error as exc:  # a cell over csv's 128 KiB limit, a NUL on old Pythons
        raise SmiOutputError(f"nvidia-smi --query-gpu: not CSV this probe reads ({exc})") \
            from None


def _field(header: str) -> str:
    return header.strip().split(" [", 1)[0].replace("clocks_throttle_reasons.",
                                                    "clocks_event_reasons.")


def _gpu(position: int, r: dict[str, str]) -> GpuInfo:
    index = integer(r.get("index"))
    return gpu(
        r.get("name") or r.get("gpu_name"), _memory(r),
        uuid=clean(r.get("uuid") or r.get("gpu_uuid")),
        index=position if index is None else index, pci_bus_id=clean(r.get("pci.bus_id")),
        compute_capability=clean(r.get("compute_cap")),
        pcie_gen_current=integer(r.get("pcie.link.gen.gpucurrent") or r.get(
            "pcie.link.gen.current")),
        pcie_gen_max=integer(r.get("pcie.link.gen.max")),
        pcie_width_current=integer(r.get("pcie.link.width.current")),
        pcie_width_max=integer(r.get("pcie.link.width.max")),
        mig_enabled=flag(r.get("mig.mode.current")), mig_pending=flag(r.get("mig.mode.pending")),
        ecc_enabled=flag(r.get("ecc.mode.current")),
        ecc_uncorrectable_volatile=integer(r.get("ecc.errors.uncorrected.volatile.total")),
        ecc_uncorrectable_aggregate=integer(r.get("ecc.errors.uncorrected.aggregate.total")),
        remapped_rows_uncorrectable=integer(r.get("remapped_rows.uncorrectable")),
        remapped_rows_pending=flag(r.get("remapped_rows.pending")),
        remapped_rows_failure=flag(r.get("remapped_rows.failure")),
        retired_pages=total(integer(r.get("retired_pages.single_bit_ecc.count")),
                            integer(r.get("retired_pages.double_bit.count"))),
        retired_pages_pending=flag(r.get("retired_pages.pending")),
        power_limit_w=number(r.get("power.limit")),
        power_default_limit_w=number(r.get("power.default_limit")),
        clock_event_reasons=_reasons(r),
    )


def _memory(r: dict[str, str]) -> int | None:
    """``memory.total``, else reserved + used + free (see the module docstring)."""
    listed = integer(r.get("memory.total"))
    if listed is not None:
        return listed
    used, free = integer(r.get("memory.used")), integer(r.get("memory.free"))
    if used is None or free is None:
        return None
    return used + free + (integer(r.get("memory.reserved")) or 0)


def _reasons(r: dict[str, str]) -> list[str]:
    """Active clock event reasons; ``.active`` and ``.supported`` are bit masks, which
    :func:`flag` does not read as a yes."""
    prefix = "clocks_event_reasons."
    return [k.removeprefix(prefix) for k, v in r.items()
            if k.startswith(prefix) and flag(v) and "idle" not in k]


def parse_query_gpu(text: str) -> tuple[list[GpuInfo], str | None]:
    """GPUs from ``nvidia-smi --query-gpu=name,memory.total,uuid,driver_version
    --format=csv,noheader,nounits``; returns them and the driver version.

    The first probe's interface, kept for callers that still ask for exactly these fields.
    """
    result = parse_csv(f"{_LEGACY}\n{text}")
    return list(result.gpus), result.driver
