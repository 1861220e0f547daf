"""A vectorised offer index: the same answers as ``core.match``, fast at 100,000 offers.

Offers are stored once as numpy columns. For each spot policy there are two orderings, both by
the matcher's full rank key (complete price before lower bound, price under that policy, more
availability, better SLA, id): one grouped by GPU model, one global. A query walks only the
groups of the GPU models it accepts (or the global ordering for "any GPU"/CPU-only requests) in
rank order, chunk by chunk, filtering each chunk with array operations, and stops as soon as it
has ``limit`` matches — the first matches in rank order are the best ones, so nothing is sorted
per call. Divisible offers (live nodes' free slices, priced by share) are few and go through the
reference matcher.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from bourse.core.compute import SPOT_POLICIES, Bounds, Compute
from bourse.core.constraints import environment_ok, image_lack
from bourse.core.gpus import catalogue
from bourse.core.match import Explanation, Match, explain, match, rank_key, region_rank_key
from bourse.core.offer import Offer

Mask = npt.NDArray[np.bool_]
Mask2D = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
_FIRST_CHUNK = 256


class _Codes:
    """Interning of strings (providers, regions, drivers...) to small integers."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._codes: dict[str, int] = {}

    def code(self, value: str | None) -> int:
        if value is None:
            return -1
        if value not in self._codes:
            self._codes[value] = len(self.values)
            self.values.append(value)
        return self._codes[value]

    def allowed(self, allow: tuple[str, ...], deny: tuple[str, ...]) -> Mask:
        """A lookup array: entry i says whether value i passes the globs; the extra last entry
        (index -1) stands for "no value" and passes only when nothing is required."""
        ok = [_globs_ok(v, allow, deny) for v in self.values]
        return np.array([*ok, not allow], dtype=bool)


@lru_cache(maxsize=65536)
def _globs_ok(value: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> bool:
    if allow and not any(fnmatch.fnmatchcase(value, g) for g in allow):
        return False
    return not any(fnmatch.fnmatchcase(value, g) for g in deny)


@dataclass
class _Columns:
    gpu: Ints
    gpu_count: Ints
    gpu_mem: Floats
    cpus: Floats
    memory: Floats
    disk: Floats
    catalog: Mask
    avail: Ints
    provider: Ints
    region: Ints
    zone: Ints
    driver: Ints
    tags: npt.NDArray[np.uint64]
    images: Mask  # can run a container image (core.constraints.image_lack)
    gpu_images: Mask  # ... with GPUs passed through
    sla: Floats  # the measured reliability score; NaN where none was measured
    price: dict[str, Floats] = field(default_factory=dict)


_GROUPINGS = (("model", ("gpu", "gpu_count")), ("count", ("gpu_count",)), ("all", ()))
_MAX_MODEL_WALKS = 6


def _segments(group_cols: list[Ints], size: int) -> dict[tuple[int, ...], tuple[int, int]]:
    """Start and end of each run of equal group values in sorted columns."""
    if not group_cols:
        return {(): (0, size)} if size else {}
    change = np.zeros(size, dtype=bool)
    if size:
        change[0] = True
    for col in group_cols:
        change[1:] |= col[1:] != col[:-1]
    starts = np.flatnonzero(change).tolist()
    ends = [*starts[1:], size]
    return {tuple(int(c[s]) for c in group_cols): (s, e) for s, e in zip(starts, ends,
                                                                         strict=True)}


@dataclass
class _Ordering:
    rows: Ints  # row numbers in rank order within each segment
    price: Floats  # the price under this ordering's spot policy, inf for none, in that order
    floor: Mask  # price_is_floor in that order: within a segment False rows come first
    segments: dict[tuple[int, ...], tuple[int, int]]

    def ranges(self, key: tuple[int, ...], ceiling: float | None) -> Iterator[Ints]:
        """The segment's rows priced at or under the ceiling (any price if None), in two
        ranges — complete prices, then lower bounds — each sorted by price."""
        start, end = self.segments.get(key, (0, 0))
        middle = start + int(np.searchsorted(self.floor[start:end], True, side="left"))
        for low, high in ((start, middle), (middle, end)):
            prices = self.price[low:high]
            if ceiling is None:
                cut = int(np.searchsorted(prices, np.inf, side="left"))
            else:
                cut = int(np.searchsorted(prices, ceiling, side="right"))
            if cut:
                yield self.rows[low:low + cut]


class OfferIndex:
    """Build once from a list of offers; ``match`` and ``explain`` like ``core.match``."""

    def __init__(self, offers: Sequence[Offer]) -> None:
        self.offers = list(offers)
        self.whole = [o for o in self.offers if not o.divisible]
        self.divisible = [o for o in self.offers if o.divisible]
        self.gpu_ids = sorted(catalogue().models)
        self._gpu_code = {g: i for i, g in enumerate(self.gpu_ids)}
        self.providers, self.regions, self.zones, self.drivers = (_Codes() for _ in range(4))
        self.tag_bits: dict[str, int] = {}
        self.cols = self._columns(self.whole)
        self._floor = np.array([o.price_is_floor for o in self.whole], dtype=bool)
        self._id_rank = np.empty(len(self.whole), dtype=np.int64)
        by_id = np.argsort(np.array([o.id for o in self.whole], dtype=object), kind="stable")
        self._id_rank[by_id] = np.arange(len(self.whole))
        self._orderings = {mode: {name: self._order(mode, groups) for name, groups in _GROUPINGS}
                           for mode in SPOT_POLICIES}
        self._gpu_memory_span = self._memory_spans()
        self.env_tables: dict[tuple[str | None, str | None], tuple[Mask2D, Mask]] = {}

    def __len__(self) -> int:
        return len(self.offers)

    def _columns(self, offers: list[Offer]) -> _Columns:
        def floats(values: list[float | None]) -> Floats:
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

        cols = _Columns(
            gpu=np.array([self._gpu_code[o.gpu] if o.gpu else len(self.gpu_ids) for o in offers],
                         dtype=np.int64),
            gpu_count=np.array([o.gpu_count for o in offers], dtype=np.int64),
            gpu_mem=floats([_gpu_gib(o) for o in offers]),
            cpus=floats([o.cpus for o in offers]),
            memory=floats([o.memory_gib for o in offers]),
            disk=floats([o.disk_gib for o in offers]),
            catalog=np.array([o.source == "catalog" for o in offers], dtype=bool),
            avail=np.array([-1 if o.available is None else o.available for o in offers],
                           dtype=np.int64),
            provider=np.array([self.providers.code(o.provider) for o in offers], dtype=np.int64),
            region=np.array([self.regions.code(o.region) for o in offers], dtype=np.int64),
            zone=np.array([self.zones.code(o.zone) for o in offers], dtype=np.int64),
            driver=np.array([self.drivers.code(o.driver) for o in offers], dtype=np.int64),
            tags=np.array([self._tag_mask(o.tags) for o in offers], dtype=np.uint64),
            images=np.array([image_lack(o.engines, "i", False) is None for o in offers],
                            dtype=bool),
            gpu_images=np.array([image_lack(o.engines, "i", True) is None for o in offers],
                                dtype=bool),
            sla=floats([o.sla for o in offers]),
        )
        on_demand, spot = floats([o.price for o in offers]), floats([o.spot_price for o in offers])
        cols.price = {"never": on_demand, "only": spot,
                      "prefer": np.where(np.isnan(spot), on_demand, spot)}
        return cols

    def _memory_spans(self) -> dict[int, tuple[float, float]]:
        """Per GPU model code: the lowest and highest per-GPU memory (GiB) among its offers."""
        spans: dict[int, tuple[float, float]] = {}
        for code, memory in zip(self.cols.gpu.tolist(), self.cols.gpu_mem.tolist(), strict=True):
            if code < len(self.gpu_ids):
                low, high = spans.get(code, (memory, memory))
                spans[code] = (min(low, memory), max(high, memory))
        return spans

    def env_table(self, torch: str | None, cuda: str | None, codes: Ints) -> Mask2D:
        """[gpu code, driver code] -> can that GPU with that driver run the environment?

        The last driver column is "installed at provisioning"; the last GPU row is "no GPU".
        Rows are filled on first use for the GPU codes a query meets (``codes``).
        """
        key = (torch, cuda)
        if key not in self.env_tables:
            shape = (len(self.gpu_ids) + 1, len(self.drivers.values) + 1)
            self.env_tables[key] = (np.zeros(shape, dtype=bool), np.zeros(shape[0], dtype=bool))
        table, filled = self.env_tables[key]
        drivers = [*self.drivers.values, None]
        for code in np.unique(codes[~filled[codes]]).tolist():
            if code < len(self.gpu_ids):
                gpu = self.gpu_ids[code]
                table[code] = [environment_ok(d, gpu, torch, cuda) for d in drivers]
            filled[code] = True
        return table

    def _tag_mask(self, tags: frozenset[str]) -> int:
        mask = 0
        for tag in sorted(tags):
            if tag not in self.tag_bits:
                if len(self.tag_bits) >= 64:
                    raise ValueError("the offer index supports at most 64 distinct tags")
                self.tag_bits[tag] = len(self.tag_bits)
            mask |= 1 << self.tag_bits[tag]
        return mask

    def _order(self, mode: str, groups: tuple[str, ...]) -> _Ordering:
        """Rows sorted by the group columns, then by the matcher's rank key."""
        price = self.cols.price[mode]
        keys = [
            self._id_rank,
            -np.array([o.sla or 0.0 for o in self.whole], dtype=np.float64),
            -np.array([o.available or 0 for o in self.whole], dtype=np.int64),
            np.where(np.isnan(price), np.inf, price),
            self._floor,
            *(getattr(self.cols, g) for g in reversed(groups)),
        ]
        rows = np.lexsort(keys).astype(np.int64)
        group_cols = [getattr(self.cols, g)[rows] for g in groups]
        return _Ordering(rows, np.where(np.isnan(price), np.inf, price)[rows],
                         self._floor[rows], _segments(group_cols, len(rows)))

    def match(self, compute: Compute, limit: int = 10,
              data_region: str | None = None) -> list[Match]:
        """The ``limit`` best offers for ``compute``, identical to ``core.match``.

        With a ``data_region``, same-region offers move ahead of others of equal price: the
        walk is widened until it holds every offer tied with the last one kept."""
        found = self._best(compute, limit)
        wider = limit
        while data_region is not None and len(found) == wider and _tied_past(found, limit):
            wider *= 2
            found = self._best(compute, wider)
        found.sort(key=lambda m: region_rank_key(m, data_region))
        return found[:limit]

    def _best(self, compute: Compute, limit: int) -> list[Match]:
        query = _Query(self, compute)
        found: list[Match] = []
        for rows in self._walks(compute):
            found.extend(query.first_matches(rows, limit))
        found.extend(match(compute, self.divisible, limit))
        found.sort(key=lambda m: rank_key(m.offer, m.price))
        return found[:limit]

    def _walks(self, compute: Compute) -> Iterator[Ints]:
        """Row ranges, each in rank order, that together hold every possible match."""
        orderings, ceiling = self._orderings[compute.spot], compute.max_price
        if compute.gpu is None:
            yield from orderings["all"].ranges((), ceiling)
            return
        count, codes = compute.gpu.count, self._candidate_codes(compute)
        if len(codes) <= _MAX_MODEL_WALKS:
            for code in codes:
                yield from orderings["model"].ranges((code, count), ceiling)
        else:
            yield from orderings["count"].ranges((count,), ceiling)

    def _candidate_codes(self, compute: Compute) -> list[int]:
        assert compute.gpu is not None
        if compute.gpu.models:
            return list(dict.fromkeys(self._gpu_code[m] for m in compute.gpu.models))
        bounds = compute.gpu.memory
        return [code for code, (low, high) in self._gpu_memory_span.items()
                if high >= bounds.min and (bounds.max is None or low <= bounds.max)]

    def explain(self, compute: Compute, nearest: int = 5,
                data_region: str | None = None) -> Explanation:
        return explain(compute, self.offers, nearest, data_region)


def _tied_past(found: list[Match], limit: int) -> bool:
    """Whether the last match found has the same price class as the ``limit``-th one, so
    matches beyond it may still be tied with those kept."""
    if len(found) < limit or limit == 0:
        return False
    kept, last = found[limit - 1], found[-1]
    return (kept.offer.price_is_floor, kept.price) == (last.offer.price_is_floor, last.price)


def _gpu_gib(offer: Offer) -> float | None:
    if offer.gpu is None:
        return None
    if offer.gpu_memory_mib is not None:
        return offer.gpu_memory_mib / 1024
    return float(catalogue().get(offer.gpu).memory_gb)


def _in(bounds: Bounds, values: Floats) -> Mask:
    ok = values >= bounds.min
    if bounds.max is not None:
        ok &= values <= bounds.max
    return ok


class _Query:
    """One Compute compiled against an index: lookup arrays and per-chunk masks."""

    def __init__(self, index: OfferIndex, compute: Compute) -> None:
        self.index, self.compute, self.cols = index, compute, index.cols
        self.price = index.cols.price[compute.spot]
        self.provider_ok = index.providers.allowed(compute.providers, compute.exclude_providers)
        self.region_allowed = index.regions.allowed(compute.regions, ())
        self.region_not_denied = index.regions.allowed((), compute.exclude_regions)
        self.zone_allowed = index.zones.allowed(compute.regions, ())
        self.zone_allowed[-1] = False  # "no zone" never rescues a region
        self.zone_not_denied = index.zones.allowed((), compute.exclude_regions)
        unknown_tag = any(t not in index.tag_bits for t in compute.tags)
        self.tags_need = np.uint64(sum(1 << index.tag_bits.get(t, 0) for t in set(compute.tags)))
        self.impossible = unknown_tag

    def first_matches(self, rows: Ints, limit: int) -> list[Match]:
        if self.impossible:
            return []
        found: list[Match] = []
        size, start = _FIRST_CHUNK, 0
        while start < len(rows) and len(found) < limit:
            chunk = rows[start:start + size]
            hits = chunk[self.mask(chunk)][: limit - len(found)]
            found.extend(self._match(int(i)) for i in hits)
            start, size = start + size, size * 4
        return found

    def _match(self, row: int) -> Match:
        offer = self.index.whole[row]
        spot = self.compute.spot == "only" or (
            self.compute.spot == "prefer" and offer.spot_price is not None)
        return Match(offer, float(self.price[row]), spot)

    def mask(self, rows: Ints) -> Mask:
        c, cols = self.compute, self.cols
        price = self.price[rows]
        ok = ~np.isnan(price)
        if c.max_price is not None:
            ok &= price <= c.max_price
        if c.min_reliability is not None:
            ok &= cols.sla[rows] >= c.min_reliability  # NaN (not measured) compares False
        if c.gpu is not None:
            ok &= self._gpu_mask(rows)
        ok &= self.provider_ok[cols.provider[rows]]
        if c.regions or c.exclude_regions:
            region, zone = cols.region[rows], cols.zone[rows]
            ok &= self.region_not_denied[region] & self.zone_not_denied[zone]
            if c.regions:
                ok &= self.region_allowed[region] | self.zone_allowed[zone]
        if c.tags:
            ok &= (cols.tags[rows] & self.tags_need) == self.tags_need
        ok &= self._size_mask(rows)
        if c.image is not None:
            ok &= (cols.gpu_images if c.gpu is not None else cols.images)[rows]
        need = np.where(cols.catalog[rows], c.num_nodes, 1)
        avail = cols.avail[rows]
        ok &= (avail < 0) | (avail >= need)
        return ok

    def _gpu_mask(self, rows: Ints) -> Mask:
        c, cols = self.compute, self.cols
        assert c.gpu is not None
        gpu = cols.gpu[rows]
        ok: Mask = (gpu < len(self.index.gpu_ids)) & (cols.gpu_count[rows] == c.gpu.count)
        if not c.gpu.memory.unbounded:
            ok &= _in(c.gpu.memory, cols.gpu_mem[rows])
        if c.torch is not None or c.cuda is not None:
            ok &= self._env_mask(gpu, cols.driver[rows])
        return ok

    def _size_mask(self, rows: Ints) -> Mask:
        c, cols = self.compute, self.cols
        ok = np.ones(len(rows), dtype=bool)
        if not c.cpus.unbounded:
            ok &= _in(c.cpus, cols.cpus[rows])
        if not c.memory.unbounded:
            ok &= _in(c.memory, cols.memory[rows])
        if not c.disk.unbounded:
            disk = cols.disk[rows]
            ok &= _in(c.disk, disk) | (np.isnan(disk) & cols.catalog[rows])
        return ok

    def _env_mask(self, gpu: Ints, driver: Ints) -> Mask:
        table = self.index.env_table(self.compute.torch, self.compute.cuda, gpu)
        ok: Mask = table[gpu, driver]  # driver code -1 picks the "installed later" column
        return ok
