"""Matcher benchmark: 100,000 offers x 1,000 requirements.

The offers are the real catalogue rows replicated across synthetic providers and regions with
perturbed prices, drivers, tags, availability and SLA. For every requirement the indexed matcher
(``market.index``) is timed and its top 5 compared with the brute-force reference
(``core.match``, a plain loop) run in the same process: any difference fails the run.

    python benchmarks/match.py [--offers 100000] [--queries 1000] [--seed 7] [--workers 2]

Target (issue 2): p50 <= 2 ms and p99 <= 10 ms per indexed call.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from bourse.core.compute import Compute
from bourse.core.match import match
from bourse.core.offer import Offer
from bourse.market.catalogs import catalog_offers
from bourse.market.index import OfferIndex

DRIVERS = [None, None, "470.82.01", "515.65.01", "535.104.05", "550.54.15", "570.124.06",
           "580.95.05"]
TAGS = ["hipaa", "soc2", "gdpr", "eu-only"]
LABELS = ["a100", "a100-40gb", "a100-80gb", "h100", "h100|a100-80gb", "l4", "t4", "v100",
          "rtx4090", "l40s", "a10g", "h200", "b200", "rtx-a6000", "40GB+", "24GB..48GB",
          "80GB+", None, "mi300x", "rtx3090|rtx4090"]


def synthetic_offers(total: int, rng: random.Random) -> list[Offer]:
    base = list(catalog_offers())
    out: list[Offer] = []
    copy = 0
    while len(out) < total:
        for offer in base:
            if len(out) >= total:
                break
            out.append(_perturb(offer, copy, rng))
        copy += 1
    return out


def _perturb(offer: Offer, copy: int, rng: random.Random) -> Offer:
    if copy == 0:
        return offer

    def jitter(price: float | None) -> float | None:
        return None if price is None else round(price * rng.uniform(0.8, 1.2), 4)

    return replace(
        offer, id=f"{offer.id}~{copy}", provider=f"{offer.provider}-s{copy % 7}",
        region=f"{offer.region}-{copy % 3}", price=jitter(offer.price),
        spot_price=jitter(offer.spot_price), driver=rng.choice(DRIVERS),
        available=rng.choice([None, 0, 1, 2, 4, 8]), sla=rng.choice([None, 0.9, 0.99, 0.999]),
        tags=frozenset(rng.sample(TAGS, rng.randint(0, 2))),
    )


def requirements(count: int, rng: random.Random) -> list[Compute]:
    out = []
    while len(out) < count:
        fields: dict[str, object] = {"spot": rng.choice(["never", "prefer", "only"])}
        label = rng.choice(LABELS)
        if label is not None:
            fields["gpu"] = f"{label}:{rng.choice([1, 1, 1, 2, 4, 8])}"
            if rng.random() < 0.3:
                fields["torch"] = rng.choice(["2.1", "2.4", "2.8", "2.13"])
        if rng.random() < 0.4:
            fields["cpus"] = f"{rng.choice([4, 8, 16, 32])}+"
        if rng.random() < 0.3:
            fields["memory"] = f"{rng.choice([16, 64, 128])}GB+"
        if rng.random() < 0.4:
            fields["max_price"] = rng.choice([0.5, 1, 2, 5, 20, 40])
        if rng.random() < 0.2:
            fields["regions"] = rng.choice(["us-*", "eu*", "*east*", "asia-*"])
        if rng.random() < 0.1:
            fields["exclude_providers"] = rng.choice(["gcp*", "vast*", "runpod-s1"])
        if rng.random() < 0.1:
            fields["tags"] = [rng.choice(TAGS)]
        out.append(Compute(**fields))  # type: ignore[arg-type]
    return out


_SHARED: list[Offer] = []


def _reference(compute_json: str) -> list[str]:
    compute = Compute.model_validate_json(compute_json)
    return [m.offer.id for m in match(compute, _SHARED, limit=5)]


def _init(total: int, seed: int) -> None:
    _SHARED[:] = synthetic_offers(total, random.Random(seed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--offers", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    offers = synthetic_offers(args.offers, random.Random(args.seed))
    queries = requirements(args.queries, random.Random(args.seed + 1))
    started = time.perf_counter()
    index = OfferIndex(offers)
    print(f"offers {len(offers):,}  queries {len(queries):,}  "
          f"index built in {time.perf_counter() - started:.2f} s")

    latencies, answers = [], []
    for compute in queries:
        t0 = time.perf_counter_ns()
        found = index.match(compute, limit=5)
        latencies.append((time.perf_counter_ns() - t0) / 1e6)
        answers.append([m.offer.id for m in found])

    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers, initializer=_init,
                             initargs=(args.offers, args.seed)) as pool:
        reference = list(pool.map(_reference, [q.model_dump_json() for q in queries],
                                  chunksize=8))
    brute_s = (time.perf_counter() - t0) * args.workers / len(queries)

    return _report(latencies, answers, reference, brute_s, queries)


def _report(latencies: list[float], answers: list[list[str]], reference: list[list[str]],
            brute_s: float, queries: list[Compute]) -> int:
    latencies_sorted = sorted(latencies)
    p50 = statistics.median(latencies_sorted)
    p99 = latencies_sorted[int(len(latencies_sorted) * 0.99) - 1]
    throughput = len(latencies) / (sum(latencies) / 1000)
    empty = sum(1 for a in answers if not a)
    print(f"indexed match   p50 {p50:.3f} ms  p99 {p99:.3f} ms  max {max(latencies):.3f} ms  "
          f"throughput {throughput:,.0f} calls/s  ({empty} queries matched nothing)")
    print(f"brute force     {brute_s * 1000:.1f} ms per call (CPU time per worker)  "
          f"speed-up x{brute_s * 1000 / p50:,.0f} at p50")
    wrong = [i for i, (a, r) in enumerate(zip(answers, reference, strict=True)) if a != r]
    print(f"top-5 equal to the reference on {len(answers) - len(wrong)}/{len(answers)} queries")
    for i in wrong[:5]:
        print(f"  MISMATCH {queries[i].describe()}: {answers[i]} != {reference[i]}")
    ok = not wrong and p50 <= 2.0 and p99 <= 10.0
    print(f"target p50 <= 2 ms, p99 <= 10 ms: {'met' if ok else 'NOT met'}")
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
