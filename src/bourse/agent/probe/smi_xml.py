"""``nvidia-smi -q -x``: the richest text source, read with defusedxml.

The layout drifts between driver generations, and every drift seen in the captures under
``tests/fixtures/nvidia-smi`` is handled here: ``clocks_throttle_reasons`` became
``clocks_event_reasons``; ``power_readings/power_limit`` became
``gpu_power_readings/current_power_limit``; ECC counters went from ``double_bit/total`` (Kepler
to Turing) to ``sram_uncorrectable`` + ``dram_uncorrectable`` (v11) to
``sram_uncorrectable_parity`` + ``_secded`` (v13); pre-Ampere boards retire pages where newer
ones remap rows (``remapped_rows`` is a block, or the text ``N/A``).

The input is untrusted (anything named ``nvidia-smi`` on PATH may print it): entity
declarations, external references and a DOCTYPE with an internal subset are refused, and so is
input over :data:`MAX_XML_CHARS`. nvidia-smi's own ``<!DOCTYPE nvidia_smi_log SYSTEM
"nvsmi_device_vNN.dtd">`` is allowed: expat never loads an external DTD.
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from bourse.agent.probe.reading import SmiOutputError, SmiReading, gpu, reading
from bourse.agent.probe.values import clean, flag, integer, number, total
from bourse.protocol.common import GpuInfo, MigInstance

MAX_XML_CHARS = 16 * 2**20  # an 8-GPU -q -x is ~0.8 MB; 16 MiB leaves room for 100+ GPUs
_INTERNAL_SUBSET = re.compile(r"<!DOCTYPE[^>\[]*\[", re.IGNORECASE)
_REASON_PREFIX = re.compile(r"^clocks_(?:throttle|event)_reasons?_")


def parse_xml(text: str) -> SmiReading:
    """The driver, CUDA version and GPUs of an ``nvidia-smi -q -x`` document.

    Raises :class:`SmiOutputError` for unsafe or unreadable input, never anything else.
    """
    root = _safe_root(text)
    if root.tag != "nvidia_smi_log":
        raise SmiOutputError(f"nvidia-smi -q -x: root element <{root.tag}>, not <nvidia_smi_log>")
    gpus = [_gpu(index, element) for index, element in enumerate(root.findall("gpu"))]
    return reading("nvidia-smi-xml", root.findtext("driver_version"),
                   root.findtext("cuda_version"), gpus)


def _safe_root(text: str) -> Element:
    if len(text) > MAX_XML_CHARS:
        raise SmiOutputError(f"nvidia-smi -q -x: {len(text)} characters of output, more than "
                             f"the {MAX_XML_CHARS} this probe reads; refused")
    if _INTERNAL_SUBSET.search(text):
        raise SmiOutputError("nvidia-smi -q -x: a DOCTYPE with an internal subset (entity or "
                             "element declarations) is not nvidia-smi output; refused")
    try:
        root: Element = fromstring(text, forbid_dtd=False, forbid_entities=True,
                                   forbid_external=True)
    except DefusedXmlException as exc:
        raise SmiOutputError(f"nvidia-smi -q -x: unsafe XML refused ({exc})") from None
    except ParseError as exc:
        raise SmiOutputError(f"nvidia-smi -q -x: not well-formed XML ({exc})") from None
    return root


def _text(element: Element, *paths: str) -> str | None:
    """The first of ``paths`` that holds a value."""
    for path in paths:
        value = clean(element.findtext(path))
        if value is not None:
            return value
    return None


def _gpu(index: int, g: Element) -> GpuInfo:
    link = "pci/pci_gpu_link_info/"
    return gpu(
        _text(g, "product_name"), integer(_text(g, "fb_memory_usage/total")),
        uuid=_text(g, "uuid"), index=index, pci_bus_id=clean(g.get("id")),
        pcie_gen_current=integer(_text(g, link + "pcie_gen/current_link_gen")),
        pcie_gen_max=integer(_text(g, link + "pcie_gen/max_link_gen")),
        pcie_width_current=integer(_text(g, link + "link_widths/current_link_width")),
        pcie_width_max=integer(_text(g, link + "link_widths/max_link_width")),
        mig_enabled=flag(_text(g, "mig_mode/current_mig")),
        mig_pending=flag(_text(g, "mig_mode/pending_mig")),
        mig_instances=[_mig(m) for m in g.findall("mig_devices/mig_device")],
        ecc_enabled=flag(_text(g, "ecc_mode/current_ecc")),
        ecc_uncorrectable_volatile=_uncorrectable(g.find("ecc_errors/volatile")),
        ecc_uncorrectable_aggregate=_uncorrectable(g.find("ecc_errors/aggregate")),
        remapped_rows_uncorrectable=integer(_text(g, "remapped_rows/remapped_row_unc")),
        remapped_rows_pending=flag(_text(g, "remapped_rows/remapped_row_pending")),
        remapped_rows_failure=flag(_text(g, "remapped_rows/remapped_row_failure")),
        retired_pages=total(
            integer(_text(g, "retired_pages/multiple_single_bit_retirement/retired_count")),
            integer(_text(g, "retired_pages/double_bit_retirement/retired_count"))),
        retired_pages_pending=_any_flag(_text(g, "retired_pages/pending_retirement"),
                                        _text(g, "retired_pages/pending_blacklist")),
        power_limit_w=number(_text(g, "power_readings/power_limit",
                                   "gpu_power_readings/current_power_limit")),
        power_default_limit_w=number(_text(g, "power_readings/default_power_limit",
                                           "gpu_power_readings/default_power_limit")),
        clock_event_reasons=_reasons(g),
    )


def _uncorrectable(block: Element | None) -> int | None:
    """Uncorrectable ECC errors in a ``volatile`` or ``aggregate`` block, whatever its layout."""
    if block is None:
        return None
    counts = [integer(child.text) for child in block if "uncorrectable" in child.tag]
    counts.append(integer(block.findtext("double_bit/total")))
    return total(*counts)


def _any_flag(*values: str | None) -> bool | None:
    flags = [f for f in map(flag, values) if f is not None]
    return any(flags) if flags else None


def _reasons(g: Element) -> list[str]:
    block = g.find("clocks_event_reasons")
    if block is None:
        block = g.find("clocks_throttle_reasons")
    if block is None:
        return []
    names = [_REASON_PREFIX.sub("", child.tag) for child in block.iter()
             if child is not block and flag(child.text)]
    return [n for n in names if "idle" not in n]


def _mig(m: Element) -> MigInstance:
    return MigInstance(
        index=integer(m.findtext("index")),
        gpu_instance_id=integer(m.findtext("gpu_instance_id")),
        compute_instance_id=integer(m.findtext("compute_instance_id")),
        memory_mib=integer(m.findtext("fb_memory_usage/total")),
        multiprocessors=integer(m.findtext("device_attributes/shared/multiprocessor_count")),
        uuid=clean(m.findtext("uuid")),
    )
