"""A request to a service: a replica chosen by the gateway, its stream, and retries.

A request that never reached a replica (the stream could not be opened: the replica died, its
node is gone) is retried on another replica whatever its method; one that was sent and got no
answer is retried only when its method is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS,
PUT, DELETE), since a POST may have been acted on. Either way the replica is taken out of the
rotation at once. At most ``MAX_TRIES`` replicas are tried. The latency recorded is the time
to the response's head, and an error is a 5xx from the replica or no answer at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from bourse.core.errors import BourseError
from bourse.protocol.stream import PortTarget
from bourse.server.agents.connections import Connections
from bourse.server.serving.gateway import Gateway, Replica, Route
from bourse.server.streams.proxy import BadGateway, Upstream, proxy_http
from bourse.server.streams.tunnels import Tunnels, Unreachable
from bourse.tunnel.stream import Stream

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
MAX_TRIES = 3


class NoReplica(BourseError):
    """No replica of the service is ready to take the request."""

    http_status = 503


@dataclass
class Forwarder:
    gateway: Gateway
    tunnels: Tunnels
    connections: Connections
    clock: Callable[[], float] = time.time

    async def forward(self, request: Request, route: Route, upstream: Upstream) -> Response:
        body = await request.body()
        tried: set[str] = set()
        while True:
            replica = self.gateway.choose(route, frozenset(tried))
            if replica is None or len(tried) >= MAX_TRIES:
                raise NoReplica(f"no ready replica of service {route.name} "
                                f"({len(tried)} tried)",
                                hint="`bourse services show NAME` says what its replicas do")
            tried.add(replica.info.job_id)
            answer = await self._try(request, route, replica, upstream, body)
            if answer is not None:
                return answer

    async def _try(self, request: Request, route: Route, replica: Replica,
                   upstream: Upstream, body: bytes) -> Response | None:
        """The replica's answer; None to try another."""
        started = time.perf_counter()
        replica.outstanding += 1
        replica.last = started
        release = _Release(replica, self.tunnels)
        try:
            stream = await self._open(replica)
        except BourseError:
            release()
            self.gateway.failed(replica)
            return None  # nothing was sent: any method may go elsewhere
        release.stream = stream
        try:
            response = await proxy_http(request, stream, upstream, release, body=body)
        except BadGateway as exc:
            self.gateway.failed(replica)
            if request.method in IDEMPOTENT:
                return None
            self._record(route, replica, started, error=True)
            raise Unreachable(f"replica {replica.info.job_id} of service {route.name} "
                              f"did not answer: {exc}") from None
        self._record(route, replica, started, error=response.status_code >= 500)
        return response

    async def _open(self, replica: Replica) -> Stream:
        info = replica.info
        carrier = self.connections.get(info.node_id) if info.node_id else None
        if carrier is None:
            raise Unreachable(f"the node of replica {info.job_id} is not connected")
        return await self.tunnels.open(carrier, info.job_id, info.attempt,
                                       PortTarget(port=info.port), timeout=5.0)

    def _record(self, route: Route, replica: Replica, started: float, error: bool) -> None:
        latency_ms = (time.perf_counter() - started) * 1000
        self.gateway.record(route, replica.info.version, self.clock(), latency_ms, error)


class _Release:
    """Called when the stream is done with (perhaps twice): one fewer outstanding request."""

    def __init__(self, replica: Replica, tunnels: Tunnels) -> None:
        self.replica, self.tunnels = replica, tunnels
        self.stream: Stream | None = None
        self._done = False

    def __call__(self) -> None:
        if self._done:
            return
        self._done = True
        self.replica.outstanding -= 1
        if self.stream is not None:
            self.tunnels.close(self.stream)
