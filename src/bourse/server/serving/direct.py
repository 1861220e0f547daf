"""A request forwarded straight to a replica on this machine's loopback, over a pooled
HTTP/1.1 connection kept alive between requests.

Only for replicas whose node shares the coordinator's loopback (``tunnel.loopback``: the same
boot and network namespace, proven by the agent's hello and its connection's address); every
other replica is reached over its agent's streams (``streams.proxy``). The connection goes to
``127.0.0.1:<the replica's port>`` — the port the keeper gave the replica's job, never one a
caller names — with the same headers the stream path sends (the exchange's credentials
dropped), except that it is not closed after the answer. The proxy's environment (HTTP_PROXY
and the like) is ignored: a loopback request must not leave the machine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse

from bourse.server.streams.proxy import Upstream, request_headers, response_headers

LOOPBACK = "127.0.0.1"
MAX_CONNECTIONS = 512  # per coordinator, all replicas together
KEEP_ALIVE_S = 30.0  # an idle connection to a replica is closed after this long
CONNECT_TIMEOUT_S = 5.0
FRAMING = frozenset({b"content-length", b"transfer-encoding"})  # re-done for the body sent


class NotReached(Exception):
    """No connection to the replica: nothing was sent (any method may go elsewhere)."""


class NoAnswer(Exception):
    """The request was sent (perhaps) and no answer came: the replica may have acted."""


class Direct:
    """The pool of connections to replicas on this machine; one per coordinator."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def _pool(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._transport, trust_env=False, follow_redirects=False,
                timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S, pool=CONNECT_TIMEOUT_S),
                limits=httpx.Limits(max_connections=MAX_CONNECTIONS,
                                    max_keepalive_connections=MAX_CONNECTIONS,
                                    keepalive_expiry=KEEP_ALIVE_S))
        return self._client

    async def send(self, request: Request, port: int, upstream: Upstream, body: bytes,
                   done: Callable[[], None]) -> StreamingResponse:
        """The replica's answer, its body relayed as it comes; ``done`` is called once the
        connection is no longer used (at once when NotReached or NoAnswer is raised)."""
        pool = self._pool()
        headers = [(name, value) for name, value in
                   request_headers(request.headers.raw, upstream.prefix, close=False)
                   if name not in FRAMING]
        outgoing = pool.build_request(request.method, f"http://{LOOPBACK}:{port}"
                                      f"{upstream.target}", headers=headers,
                                      content=body or None)
        try:
            answer = await pool.send(outgoing, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            done()
            raise NotReached(f"nothing answers on {LOOPBACK}:{port}: {exc}") from None
        except httpx.TransportError as exc:
            done()
            raise NoAnswer(f"{LOOPBACK}:{port} did not answer: {exc}") from None
        except BaseException:
            done()
            raise
        relayed = StreamingResponse(_body(answer, done), status_code=answer.status_code,
                                    background=BackgroundTask(_finish, answer, done))
        relayed.raw_headers = response_headers(answer.headers.raw)
        return relayed

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def _body(answer: httpx.Response, done: Callable[[], None]) -> AsyncIterator[bytes]:
    try:
        async for chunk in answer.aiter_raw():
            yield chunk
    except httpx.TransportError:
        return  # the replica went away mid-body: the client sees a short response
    finally:
        await _finish(answer, done)


async def _finish(answer: httpx.Response, done: Callable[[], None]) -> None:
    """The connection goes back to the pool (or is closed, mid-body); once per answer."""
    await answer.aclose()
    done()
