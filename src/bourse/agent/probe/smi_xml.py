"""``nvidia-smi -q -x``: the richest text source, read with defusedxml.

The layout drifts between driver generations, and every drift seen in the captures under
``tests/fixtures/nvidia-smi`` is handled here: ``clocks_throttle_reasons`` became
``clocks_event_reasons``; ``power_readings/power_limit`` became
``gpu_power_readings/current_power_limit``; ECC counters went from ``double_bit/total`` (Kepler
to Turing) to ``sram_uncorrectable`` + ``dram_uncorrectable`` (v11) to
``sram_uncorrectable_parity`` + ``_secded`` (v13); pre-Ampere boards retire pages where newer
ones remap rows (``remapped_rows`` is a block, or the text ``N/A``).

The input is untrusted (anything named ``nvidia-smi`` on PATH may print it). nvidia-smi's own
``<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_vNN.dtd">`` is allowed (expat never loads an
external DTD), and so is the internal subset ``-q -x --dtd`` embeds, which declares elements
and attributes only. Anything else in a subset is refused before parsing: entity and notation
declarations, parameter-entity references (``%name;``), entity references in attribute
defaults, processing instructions and conditional sections, so neither an entity expansion
(billion laughs) nor an external fetch (XXE) can be declared; defusedxml refuses entities
again while parsing. Input over :data:`MAX_XML_CHARS` is refused unread.
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from bourse.agent.probe.reading import SmiOutputError, SmiReading, each_gpu, gpu, reading
from bourse.agent.probe.values import clean, flag, integer, number, total
from bourse.protocol.common import GpuInfo, MigInstance

MAX_XML_CHARS = 16 * 2**20  # an 8-GPU -q -x is ~0.8 MB; 16 MiB leaves room for 100+ GPUs
_SUBSET_START = re.compile(r"<!DOCTYPE[^>\[]*\[", re.IGNORECASE)
# One markup declaration of a subset: a comment, or an element or attribute-list declaration
# whose quoted and unquoted parts hold no "%", "&" or "<" (no entity of any kind).
_DECLARATION = re.compile(
    r"""\s*(?:<!--.*?-->|<!(?:ELEMENT|ATTLIST)\s(?:[^<>"'%&]|"[^"<%&]*"|'[^'<%&]*')*>)""",
    re.DOTALL)
_SUBSET_END = re.compile(r"\s*\]\s*>")
_REASON_PREFIX = re.compile(r"^clocks_(?:throttle|event)_reasons?_")


def parse_xml(text: str) -> SmiReading:
    """The driver, CUDA version and GPUs of an ``nvidia-smi -q -x`` document.

    Raises :class:`SmiOutputError` for unsafe or unreadable input, never anything else.
    """
    root = _safe_root(text)
    if root.tag != "nvidia_smi_log":
        raise SmiOutputError(f"nvidia-smi -q -x: root element <{root.tag}>, not <nvidia_smi_log>")
    gpus, problems = each_gpu("nvidia-smi-xml", root.findall("gpu"), _gpu)
    return reading("nvidia-smi-xml", root.findtext("driver_version"),
                   root.findtext("cuda_version"), gpus, attached=root.findtext("attached_gpus"),
                   problems=problems)


def _safe_root(text: str) -> Element:
    if len(text) > MAX_XML_CHARS:
        raise SmiOutputError(f"nvidia-smi -q -x: {len(text)} characters of output, more than "
                             f"the {MAX_XML_CHARS} this probe reads; refused")
    check_doctype(text)
    try:
        root: Element = fromstring(text, forbid_dtd=False, forbid_entities=True,
                                   forbid_external=True)
    except DefusedXmlException as exc:
        raise SmiOutputError(f"nvidia-smi -q -x: unsafe XML refused ({exc})") from None
    except ParseError as exc:
        raise SmiOutputError(f"nvidia-smi -q -x: not well-formed XML ({exc})") from None
    return root


def check_doctype(text: str) -> None:
    """Refuse every internal DTD subset that declares more than elements and attributes."""
    for start in _SUBSET_START.finditer(text):
        position = start.end()
        while declaration := _DECLARATION.match(text, position):
            position = declaration.end()
        if not _SUBSET_END.match(text, position):
            found = text[position:position + 60].strip().split("\n", 1)[0]
            raise SmiOutputError(
                f"nvidia-smi -q -x: its DTD holds {found!r}; only element and attribute "
                "declarations are read (an entity could expand or fetch a file): refused")


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
