"""The gateway's table: each running service's versions, weights and replicas, in memory.

The keeper (``serving.keeper``) writes it from the database every tick (``sync``); requests
read it (``choose``) and write back what they saw (``record``, ``failed``). A replica takes
traffic only once its readiness probe answered; the first connection failure takes it out at
once, and the keeper's probe lets it back in when it answers again. Figures are kept per
version in a sliding window (``core.window``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bourse.core.balance import Candidate, pick
from bourse.core.window import EMPTY, Figures, Window

WINDOW_S = 60


@dataclass(frozen=True)
class ReplicaInfo:
    """What the database says of a replica: its job and, once running, where."""

    job_id: str
    version: int
    port: int
    node_id: str | None  # None until it runs
    attempt: int
    running_since: float | None
    readiness_path: str
    readiness_timeout_s: float
    initial_delay_s: float


@dataclass
class Replica:
    info: ReplicaInfo
    ready: bool = False
    outstanding: int = 0
    last: float = 0.0
    probing: bool = False
    ever_ready: bool = False


@dataclass
class Route:
    service_id: str
    project: str
    name: str
    weights: dict[int, int] = field(default_factory=dict)
    replicas: dict[str, Replica] = field(default_factory=dict)
    windows: dict[int, Window] = field(default_factory=dict)

    def ready_versions(self) -> set[int]:
        return {r.info.version for r in self.replicas.values() if r.ready}

    def ever_ready(self, version: int) -> bool:
        return any(r.ever_ready for r in self.replicas.values() if r.info.version == version)

    def figures(self, version: int, now: float, since: float | None = None) -> Figures:
        window = self.windows.get(version)
        return EMPTY if window is None else window.figures(now, since)


class Gateway:
    def __init__(self, draw: random.Random | None = None) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self._draw = draw or random.Random()

    def route(self, project: str, name: str) -> Route | None:
        return self.routes.get((project, name))

    def sync(self, service_id: str, project: str, name: str, weights: Mapping[int, int],
             replicas: Sequence[ReplicaInfo]) -> Route:
        """The service as the database has it: new replicas join unready; a replica whose
        job moved (another attempt, another node) is unready until probed again."""
        route = self.routes.setdefault((project, name), Route(service_id, project, name))
        route.weights = dict(weights)
        known = {info.job_id: info for info in replicas}
        for job_id in list(route.replicas):
            if job_id not in known:
                del route.replicas[job_id]
        for job_id, info in known.items():
            current = route.replicas.get(job_id)
            if current is None or (current.info.node_id, current.info.attempt) != (
                    info.node_id, info.attempt):
                route.replicas[job_id] = Replica(info)
            else:
                current.info = info
        for version in weights:
            route.windows.setdefault(version, Window(WINDOW_S))
        return route

    def drop(self, project: str, name: str) -> None:
        self.routes.pop((project, name), None)

    def keep_only(self, keys: set[tuple[str, str]]) -> None:
        for key in set(self.routes) - keys:
            del self.routes[key]

    def choose(self, route: Route, exclude: frozenset[str] = frozenset()) -> Replica | None:
        candidates = [Candidate(job_id, r.info.version, r.outstanding, r.last)
                      for job_id, r in route.replicas.items() if r.ready]
        chosen = pick(route.weights, candidates, self._draw.random(), exclude)
        return None if chosen is None else route.replicas[chosen.replica]

    @staticmethod
    def record(route: Route, version: int, now: float, latency_ms: float,
               error: bool) -> None:
        window = route.windows.setdefault(version, Window(WINDOW_S))
        window.record(now, latency_ms, error)

    @staticmethod
    def failed(replica: Replica) -> None:
        """A connection to it failed: no more traffic until a probe answers."""
        replica.ready = False
