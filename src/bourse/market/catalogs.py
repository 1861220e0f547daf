"""Public-cloud GPU catalogues (shipped in ``bourse/data/catalogs``) turned into Offers.

The CSVs are SkyPilot's public catalogues, copied verbatim (see MANIFEST.md there). Their quirks
are handled here, not by editing the data: columns in a different order per file, GPU memory
that is sometimes per GPU and sometimes a total, GCP rows that price only the accelerator
attachment (marked ``price_is_floor``), vast.ai's spot prices of 0.00 and placeholder
cpus/memory (treated as unknown), and duplicated rows (ids get a ``#n`` suffix).
"""

from __future__ import annotations

import ast
import csv
import io
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache
from typing import Any

from bourse.core.data import read_text
from bourse.core.errors import UnknownGpu
from bourse.core.gpus import GpuModel, catalogue
from bourse.core.offer import Offer

PROVIDERS = ("aws", "azure", "cudo", "fluidstack", "gcp", "lambda", "nebius", "runpod", "vast")
_PLACEHOLDER_SHAPES = {"vast"}  # vCPUs/MemoryGiB are 32/64.0 on every row (MANIFEST.md)
_MEMORY_IS_TOTAL = {"vast"}  # GpuInfo SizeInMiB is for all the instance's GPUs together


def _float(text: str | None) -> float | None:
    if text is None or not text.strip():
        return None
    return float(text)


def _price(text: str | None) -> float | None:
    value = _float(text)
    return value if value else None  # bourse never prices an offer at $0


def _gpu_info(text: str) -> dict[str, Any]:
    if not text.startswith("{"):
        return {}
    try:
        info = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {}
    return info if isinstance(info, dict) else {}


def _gpu_memory(provider: str, info: Mapping[str, Any], count: int) -> float | None:
    """Memory per GPU in MiB. Most catalogues list it per GPU; vast.ai lists the total."""
    gpus = info.get("Gpus") or [{}]
    size = (gpus[0].get("MemoryInfo") or {}).get("SizeInMiB")
    if not size:
        return None
    return float(size) / count if provider in _MEMORY_IS_TOTAL and count else float(size)


def _identify(provider: str, name: str, info: Mapping[str, Any],
              count: int) -> tuple[GpuModel, int]:
    """The GPU model, and its memory: the catalogue's reading when it fits the model (nebius
    lists host memory there), else the model's typical memory."""
    memory = _gpu_memory(provider, info, count)
    model = catalogue().identify(name, memory)
    if memory is not None and model.memory_matches(memory):
        return model, int(memory)
    return model, model.memory_mib


def row_offer(provider: str, row: Mapping[str, str]) -> Offer | None:
    """One catalogue row as an Offer; None for CPU-only rows."""
    name = (row.get("AcceleratorName") or "").strip()
    if not name:
        return None
    count = int(float(row["AcceleratorCount"]))
    model, memory = _identify(provider, name, _gpu_info(row.get("GpuInfo") or ""), count)
    instance = row.get("InstanceType") or f"{name} x{count} (accelerator only)"
    placeholder = provider in _PLACEHOLDER_SHAPES
    zone = (row.get("AvailabilityZone") or "").strip() or None
    return Offer(
        id=f"{provider}/{instance}/{row['Region']}" + (f"/{zone}" if zone else ""),
        provider=provider, instance_type=instance, region=row["Region"], zone=zone,
        gpu=model.id, gpu_count=count, gpu_memory_mib=memory,
        cpus=None if placeholder else _float(row.get("vCPUs")),
        memory_gib=None if placeholder else _float(row.get("MemoryGiB")),
        price=_price(row.get("Price")), spot_price=_price(row.get("SpotPrice")),
        price_is_floor=provider == "gcp" and not row.get("InstanceType"),
    )


def parse_catalog(provider: str, text: str) -> list[Offer]:
    """Offers from one catalogue CSV's text (columns are read by header name)."""
    offers: list[Offer] = []
    for line, row in enumerate(csv.DictReader(io.StringIO(text, newline="")), start=2):
        try:
            offer = row_offer(provider, row)
        except (KeyError, ValueError) as exc:
            if isinstance(exc, UnknownGpu):
                raise
            raise ValueError(f"{provider}.csv line {line}: {exc}") from exc
        if offer is not None and (offer.price is not None or offer.spot_price is not None):
            offers.append(offer)
    return unique_ids(offers)


def unique_ids(offers: Iterable[Offer]) -> list[Offer]:
    """Suffix repeated ids with ``#2``, ``#3``... so every offer id is unique."""
    seen: Counter[str] = Counter()
    out = []
    for offer in offers:
        seen[offer.id] += 1
        repeat = seen[offer.id]
        out.append(replace(offer, id=f"{offer.id}#{repeat}") if repeat > 1 else offer)
    return out


@cache
def catalog_offers(providers: tuple[str, ...] = PROVIDERS) -> tuple[Offer, ...]:
    """Every GPU offer in the shipped catalogues."""
    offers: list[Offer] = []
    for provider in providers:
        offers.extend(parse_catalog(provider, read_text(f"catalogs/{provider}.csv")))
    return tuple(offers)
