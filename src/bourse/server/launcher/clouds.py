"""The clouds a coordinator launches on: their providers, whether each may launch now, and
the catalogue offers they can launch (``bourse clouds`` shows it). A launchable offer's
``sla`` is its cloud's measured launch success rate (``rate``), so that placement ranks and
``min_reliability`` filters launches by what each cloud delivered."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from bourse.clouds.base import CloudCheck, CloudError, Explains, OfferSource, Provider
from bourse.clouds.refresh import PriceSource, Refreshed, refresh
from bourse.core.compute import Compute
from bourse.core.match import Match
from bourse.core.offer import Offer
from bourse.market.catalogs import catalog_offers
from bourse.market.index import OfferIndex
from bourse.server.config import CloudsConfig

log = logging.getLogger(__name__)
NOT_CHECKED = "not checked yet (the coordinator checks its clouds as it starts)"
REFRESH_EVERY_S = 3600.0  # spot prices and zone offerings are asked again this often
RELIST_AFTER_S = 15.0  # a cluster's nodes are listed again before a launch, when older


@dataclass(frozen=True)
class Prices:
    """Where a cloud's launchable offers come from: its API (``fetched_at``) or the shipped
    catalogue; ``stale``: regions that fell back to the catalogue, and why."""

    fetched_at: datetime | None = None
    stale: Mapping[str, str] = field(default_factory=dict)
    note: str | None = None  # why the API was not asked


class Clouds:
    """Providers by name and their state: checked at start, disabled on an auth error."""

    def __init__(self, providers: Mapping[str, Provider], config: CloudsConfig,
                 offers: Mapping[str, list[Offer]] | None = None) -> None:
        self.providers = dict(providers)
        self.config = config
        self.status: dict[str, CloudCheck] = {
            name: CloudCheck(name, False, NOT_CHECKED) for name in self.providers}
        self._catalogue = {name: _in_regions(list(found), config.regions_of(name))
                           for name, found in (offers or _catalogue(self.providers)).items()}
        self._offers = dict(self._catalogue)
        self.prices: dict[str, Prices] = {name: Prices(note="the shipped catalogue")
                                          for name in self.providers}
        self._index: tuple[tuple[str, ...], OfferIndex] | None = None
        self._pending: tuple[tuple[str, ...], OfferIndex] | None = None
        self.rates: dict[str, float] = {}  # per cloud, its measured launch success rate

    @classmethod
    def from_config(cls, config: CloudsConfig) -> Clouds:
        return cls({name: make_provider(name, config) for name in config.enabled}, config)

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(sorted(n for n, s in self.status.items() if s.enabled))

    async def check(self) -> None:
        """Check every cloud (in threads: providers are synchronous)."""
        for name, provider in self.providers.items():
            self.status[name] = await asyncio.to_thread(_check, name, provider)
            if not self.status[name].enabled:
                log.warning("cloud %s disabled: %s", name, self.status[name].reason)
        await self.refresh()

    async def refresh(self) -> None:
        """Spot prices and zone offerings from each enabled cloud's API (where it has one),
        the shipped catalogue wherever the API cannot be asked; a cluster's offers listed
        again; the index is made again."""
        await self.relist()
        for name, provider in self.providers.items():
            if self.status[name].enabled and isinstance(provider, PriceSource):
                self._refresh(name, await asyncio.to_thread(
                    refresh, provider, self._catalogue.get(name, []), datetime.now(UTC)))
        self._index = None
        if self.enabled:
            await asyncio.to_thread(self.index)  # built now, not in the first job's launch

    def _refresh(self, name: str, found: Refreshed) -> None:
        if found.fetched_at is None:  # every region failed: the catalogue stays
            self.prices[name] = Prices(None, found.stale, "the shipped catalogue (the API "
                                       "could not be asked)")
            return
        self._offers[name] = [o for o in found.offers if o.provider == name]
        self.prices[name] = Prices(found.fetched_at, found.stale)

    def disable(self, name: str, reason: str) -> None:
        log.warning("cloud %s disabled: %s", name, reason)
        old = self.status.get(name, CloudCheck(name, False))
        self.status[name] = replace(old, enabled=False, reason=reason)

    def regions(self, name: str) -> tuple[str, ...]:
        given = self.config.regions_of(name)
        return given or tuple(sorted({o.region for o in self._offers.get(name, [])}))

    def offers(self, clouds: tuple[str, ...] | None = None) -> list[Offer]:
        names = self.enabled if clouds is None else tuple(c for c in self.enabled if c in clouds)
        return [o for name in names for o in self._of(name)]

    def rate(self, rates: Mapping[str, float | None]) -> None:
        """Each cloud's launch success rate (None: not measured yet), set as the ``sla`` of
        its offers; the index is made again when a rate changed."""
        known = {n: r for n, r in rates.items() if r is not None and n in self.providers}
        if known != self.rates:
            self.rates = known
            self._index = self._pending = None

    def _of(self, name: str) -> list[Offer]:
        """The cloud's offers, scored with its rate (the index that holds them is made again
        only when a listing or a rate changed)."""
        raw, rate = self._offers.get(name, []), self.rates.get(name)
        return raw if rate is None else [replace(o, sla=rate) for o in raw]

    def index(self) -> OfferIndex:
        """The launchable offers of the enabled clouds, indexed (made again when the set of
        enabled clouds changes)."""
        if self._index is None or self._index[0] != self.enabled:
            self._index = (self.enabled, OfferIndex(self.offers()))
        return self._index[1]

    def matches(self, compute: Compute, limit: int) -> list[Match]:
        return self.index().match(compute, limit=limit) if self.enabled else []

    def launchable(self, compute: Compute) -> bool:
        """Whether some cloud that is enabled, or not checked yet, sells an offer that fits
        ``compute`` (a job submitted while the coordinator checks its clouds must not fail
        for want of a cloud)."""
        if self.matches(compute, 1):
            return True
        unchecked = [n for n, s in self.status.items() if s.reason == NOT_CHECKED]
        return bool(unchecked) and bool(self._unchecked_index(tuple(unchecked)).match(
            compute, limit=1))

    def _unchecked_index(self, names: tuple[str, ...]) -> OfferIndex:
        if self._pending is None or self._pending[0] != names:
            self._pending = (names, OfferIndex([o for n in names for o in self._of(n)]))
        return self._pending[1]

    def pending_timeouts(self) -> dict[str, float]:
        """Enabled clouds whose machines may wait unstarted (a cluster's pods): name -> how
        long before such a launch ends (``Explains``)."""
        return {n: p.pending_timeout_s for n, p in self.providers.items()
                if isinstance(p, Explains) and n in self.enabled}

    def explain(self, name: str, region: str, instance_id: str) -> str | None:
        provider = self.providers.get(name)
        if not isinstance(provider, Explains):
            return None
        try:
            return provider.explain(region, instance_id)
        except CloudError as exc:
            log.info("asking %s why %s waits failed: %s", name, instance_id, exc)
            return None

    async def relist(self, older_than_s: float = 0.0) -> None:
        """Offers again from the clouds that list their own (``OfferSource``: a cluster's
        nodes), not from a catalogue, where the last listing is older than ``older_than_s``;
        the index is made again when they changed."""
        now = datetime.now(UTC)
        for name, provider in self.providers.items():
            if not (isinstance(provider, OfferSource) and self.status[name].enabled):
                continue
            listed = self.prices[name].fetched_at
            if listed is None or (now - listed).total_seconds() >= older_than_s:
                self._list(name, provider, await asyncio.to_thread(_listed, name, provider))

    def _list(self, name: str, provider: OfferSource, found: list[Offer] | None) -> None:
        if found is None:
            self.prices[name] = replace(self.prices[name], note="the cluster could not be "
                                        "asked; its last listing stays")
            return
        if found != self._offers.get(name):
            self._offers[name] = found
            self._index = None
        self.prices[name] = Prices(datetime.now(UTC), note=f"{len(found)} offers listed "
                                   "from the cluster's nodes")

    def catalogue_size(self, name: str) -> int:
        """How many offers the cloud's catalogue has in the regions in use."""
        return len(self._offers.get(name, []))


def _check(name: str, provider: Provider) -> CloudCheck:
    try:
        return provider.check()
    except CloudError as exc:
        return CloudCheck(name, False, f"{exc.code}: {exc.message}")
    except Exception as exc:  # a provider's bug must not stop the coordinator
        log.exception("checking cloud %s failed", name)
        return CloudCheck(name, False, f"check failed: {exc}")


def _listed(name: str, provider: OfferSource) -> list[Offer] | None:
    try:
        return provider.offers()
    except CloudError as exc:
        log.warning("listing the offers of %s failed: %s", name, exc)
        return None


def _catalogue(providers: Mapping[str, Provider]) -> dict[str, list[Offer]]:
    """The shipped catalogue of each cloud that has one (a cluster lists its own)."""
    return {name: [] if isinstance(p, OfferSource) else list(catalog_offers((name,)))
            for name, p in providers.items()}


def _in_regions(offers: list[Offer], regions: tuple[str, ...]) -> list[Offer]:
    return [o for o in offers if o.region in regions] if regions else offers


def _kube_provider(config: CloudsConfig) -> Provider:
    from bourse.clouds.kube_config import KubeConfigError, load
    from bourse.clouds.kubernetes import KubeProvider, Unreachable
    kube = config.kube
    try:
        target = load(kube.kubeconfig, kube.context, kube.namespace)
    except KubeConfigError as exc:
        return Unreachable(str(exc))
    return KubeProvider(target, prices=dict(kube.gpu_prices),
                        image=config.image_of("kubernetes"),
                        pending_timeout_s=kube.pending_timeout_s)


def make_provider(name: str, config: CloudsConfig) -> Provider:
    """The provider of a cloud named in the configuration (validated there)."""
    if name == "aws":
        from bourse.clouds.aws import AwsProvider  # boto3 only when AWS is enabled
        regions = config.regions_of("aws") or tuple(sorted(
            {o.region for o in catalog_offers(("aws",))}))
        return AwsProvider(regions, image=config.image_of("aws"))
    if name == "lambda":
        from bourse.clouds.lambda_cloud import LambdaProvider
        regions = config.regions_of("lambda") or tuple(sorted(
            {o.region for o in catalog_offers(("lambda",))}))
        return LambdaProvider(regions, ssh_key=config.ssh_key_of("lambda"),
                              image=config.image_of("lambda"))
    if name == "kubernetes":
        return _kube_provider(config)
    raise ValueError(f"unknown cloud {name!r}")
