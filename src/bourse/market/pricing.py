"""List prices for nodes whose provider set none, derived from the shipped cloud catalogues.

bourse never prices an offer at $0. A node without a declared price is listed at the median
on-demand price per GPU of its model across the catalogues, plus the median price per vCPU of
the catalogues' CPU-only instances (Lambda, Nebius, RunPod) for its cpus.
"""

from __future__ import annotations

import csv
import io
import statistics
from functools import cache

from bourse.core.data import read_text
from bourse.market.catalogs import catalog_offers

_CPU_CATALOGS = ("lambda", "nebius", "runpod")


@cache
def price_per_gpu() -> dict[str, float]:
    """Median on-demand price per GPU-hour of each model (complete prices only)."""
    per: dict[str, list[float]] = {}
    for offer in catalog_offers():
        if offer.gpu and offer.price and not offer.price_is_floor and offer.gpu_count:
            per.setdefault(offer.gpu, []).append(offer.price / offer.gpu_count)
    return {gpu: statistics.median(values) for gpu, values in per.items()}


@cache
def price_per_vcpu() -> float:
    values = []
    for provider in _CPU_CATALOGS:
        text = read_text(f"catalogs/{provider}.csv")
        for row in csv.DictReader(io.StringIO(text, newline="")):
            if not row.get("AcceleratorName") and row.get("Price") and row.get("vCPUs"):
                values.append(float(row["Price"]) / float(row["vCPUs"]))
    return statistics.median(values)


def list_price(cpus: float, gpu: str | None, gpu_count: int) -> float:
    """US dollars per hour for a whole node with these resources."""
    gpu_price = price_per_gpu().get(gpu, 0.0) if gpu else 0.0
    return round(cpus * price_per_vcpu() + gpu_count * gpu_price, 4)
