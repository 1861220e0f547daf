"""A request to a service: a replica chosen by the gateway, its stream, and retries.

The request is written to the stream as soon as it is asked for, without waiting for the node
to say it connected (one round trip fewer); the node answers before the replica does. A
request that never reached a replica (the stream could not be opened: the replica died, its
node is gone) is retried on another replica whatever its method; one that was sent and got no
answer is retried only when its method is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS,
PUT, DELETE), since a POST may have been acted on. Either way the replica is taken out of the
rotation at once. At most ``MAX_TRIES`` replicas are tried. The latency recorded is the time
to the response's head, and an error is a 5xx from the replica or no answer at all.

A replica whose node shares the coordinator's loopback is reached without its agent, over a
pooled keep-alive connection (``serving.direct``), under the same rules: a connection that
could not be made sent nothing; one that broke after may have.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from bourse.core.errors import BourseError
from bourse.protocol.common import Wire
from bourse.protocol.stream import PortTarget, StreamClose
from bourse.server.agents.connections import Connections
from bourse.server.serving.direct import IDEMPOTENT, Direct, NoAnswer, NotReached
from bourse.server.serving.gateway import Gateway, Replica, Route
from bourse.server.streams.proxy import BadGateway, Upstream, proxy_http
from bourse.server.streams.tunnels import Carrier, Tunnels, Unreachable
from bourse.tunnel.stream import Stream

MAX_TRIES = 3
OPEN_TIMEOUT_S = 5.0


class _Retry(Exception):
    """The replica did not take the request (or may be retried): try another."""


class _Lost(Exception):
    """The request was sent and got no answer, and its method may not be retried."""


class NoReplica(BourseError):
    """No replica of the service is ready to take the request."""

    http_status = 503


@dataclass
class Forwarder:
    gateway: Gateway
    tunnels: Tunnels
    connections: Connections
    clock: Callable[[], float] = time.time
    direct: Direct | None = None  # to replicas on this machine's loopback

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
            if self._direct(replica):
                response = await self._straight(request, replica, upstream, body, release)
            else:
                response = await self._streamed(request, replica, upstream, body, release)
        except _Retry:
            self.gateway.failed(replica)
            return None
        except _Lost as exc:
            self.gateway.failed(replica)
            self._record(route, replica, started, error=True)
            raise Unreachable(f"replica {replica.info.job_id} of service {route.name} "
                              f"did not answer: {exc}") from None
        self._record(route, replica, started, error=response.status_code >= 500)
        return response

    def _direct(self, replica: Replica) -> bool:
        """Whether its node shares our loopback, so that it is reached without the agent."""
        node = replica.info.node_id
        carrier = self.connections.get(node) if node and self.direct is not None else None
        return carrier is not None and carrier.direct

    async def _straight(self, request: Request, replica: Replica, upstream: Upstream,
                        body: bytes, release: _Release) -> Response:
        """Over a pooled connection to 127.0.0.1 (``serving.direct``)."""
        assert self.direct is not None
        try:
            return await self.direct.send(request, replica.info.port, upstream, body,
                                          release)
        except NotReached:
            raise _Retry from None
        except NoAnswer as exc:
            if request.method in IDEMPOTENT:
                raise _Retry from None
            raise _Lost(str(exc)) from None

    async def _streamed(self, request: Request, replica: Replica, upstream: Upstream,
                        body: bytes, release: _Release) -> Response:
        """Over a stream of the agent's connection, opened for this request."""
        try:
            carrier, stream, answer = self._start(replica)
        except BourseError:
            release()
            raise _Retry from None  # nothing was sent: any method may go elsewhere
        release.stream = stream

        async def opened() -> None:
            await self.tunnels.confirm(carrier, stream, answer, timeout=OPEN_TIMEOUT_S)

        try:
            return await proxy_http(request, stream, upstream, release, body=body,
                                    opened=opened)
        except BourseError:  # the node refused the stream or was silent: nothing was sent
            raise _Retry from None
        except BadGateway as exc:
            if not _reached(answer) or request.method in IDEMPOTENT:
                raise _Retry from None
            raise _Lost(str(exc)) from None

    def _start(self, replica: Replica) -> tuple[Carrier, Stream, asyncio.Future[Wire]]:
        """The stream, asked for but not waited on: the request follows it at once (one
        round trip to the node fewer); the node's answer comes before the replica's."""
        info = replica.info
        carrier = self.connections.get(info.node_id) if info.node_id else None
        if carrier is None:
            raise Unreachable(f"the node of replica {info.job_id} is not connected")
        stream, answer = self.tunnels.start(carrier, info.job_id, info.attempt,
                                            PortTarget(port=info.port))
        return carrier, stream, answer

    def _record(self, route: Route, replica: Replica, started: float, error: bool) -> None:
        latency_ms = (time.perf_counter() - started) * 1000
        self.gateway.record(route, replica.info.version, self.clock(), latency_ms, error)


def _reached(answer: asyncio.Future[Wire]) -> bool:
    """Whether the node connected to the replica (so the request may have reached it)."""
    return answer.done() and not answer.cancelled() and not isinstance(answer.result(),
                                                                         StreamClose)


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
