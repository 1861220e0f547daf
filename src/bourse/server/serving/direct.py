"""A request forwarded straight to a replica on this machine's loopback, over an HTTP/1.1
connection kept open between requests (h11 on asyncio streams, one small pool per port).

Only for replicas whose node shares the coordinator's loopback (``tunnel.loopback``: the same
boot and network namespace, proven by the agent's hello and its connection's address); every
other replica is reached over its agent's streams (``streams.proxy``). The connection goes to
``127.0.0.1:<the replica's port>`` — the port the keeper gave the replica's job, never one a
caller names — with the same headers the stream path sends (the exchange's credentials
dropped), except that it is not closed after the answer.

Why not httpx: profiled in process, its client cost more CPU per request than the rest of
the gateway's route together (request building, URL parsing, anyio); this path is the one
every service request takes. A connection idle for ``IDLE_S`` is closed rather than reused
(under uvicorn's 5 s keep-alive, so the replica is unlikely to have closed it first), and
one the replica has closed is never reused; a request on a reused connection that got no
byte of answer is sent again on a new one only if its method is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import h11
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from bourse.server.streams.proxy import (
    Headers,
    Upstream,
    after,
    request_headers,
    response_headers,
)

LOOPBACK = "127.0.0.1"
IDLE_S = 4.0  # an idle connection older than this is closed, not reused
MAX_IDLE = 64  # per port
CONNECT_TIMEOUT_S = 5.0
READ = 64 * 1024
WHOLE = 64 * 1024  # an answer this long or shorter is read whole, then sent
FRAMING = frozenset({b"content-length", b"transfer-encoding"})  # re-done for the body sent
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})  # RFC 9110 §9.2.2


class NotReached(Exception):
    """No connection to the replica: nothing was sent (any method may go elsewhere)."""


class NoAnswer(Exception):
    """The request was sent (perhaps) and no answer came: the replica may have acted."""


@dataclass
class _Link:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    conn: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))
    idle_since: float = 0.0
    reused: bool = False

    def usable(self, now: float) -> bool:
        return (now - self.idle_since < IDLE_S and not self.reader.at_eof()
                and not self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class Direct:
    """The coordinator's connections to replicas on this machine, idle ones by port."""

    def __init__(self) -> None:
        self._idle: dict[int, list[_Link]] = {}

    async def send(self, request: Request, port: int, upstream: Upstream, body: bytes,
                   done: Callable[[], None]) -> Response:
        """The replica's answer; ``done`` is called once the connection is no longer used
        (at once when NotReached or NoAnswer is raised). An answer of at most ``WHOLE``
        bytes with a length is read whole (most are, and are in hand already: a relayed
        body costs a task and a generator per request); any other is relayed as it comes."""
        try:
            link, head = await self._exchange(request, port, upstream, body)
        except BaseException:
            done()
            raise
        headers = response_headers(head.headers.raw_items())
        length = _length(head)
        if length <= WHOLE:
            content = b"".join([chunk async for chunk in self._body(link, port, done)])
            if len(content) != length and request.method != "HEAD" and \
                    head.status_code not in (204, 304):
                raise NoAnswer(f"the replica's answer ended after {len(content)} of "
                               f"{length:.0f} bytes")
            answer = Response(content, status_code=head.status_code)
        else:
            answer = StreamingResponse(self._body(link, port, done),
                                       status_code=head.status_code, background=after(done))
        answer.raw_headers = headers
        return answer

    async def _exchange(self, request: Request, port: int, upstream: Upstream,
                        body: bytes) -> tuple[_Link, h11.Response]:
        message = _message(request, port, upstream, body)
        link = self._take(port) or await _connect(port)
        try:
            return link, await _ask(link, message)
        except NoAnswer:
            link.close()
            if not (link.reused and request.method in IDEMPOTENT):
                raise
        link = await _connect(port)  # a reused one the replica had closed: once more, anew
        try:
            return link, await _ask(link, message)
        except NoAnswer:
            link.close()
            raise

    def _take(self, port: int) -> _Link | None:
        idle, now = self._idle.get(port, []), time.monotonic()
        while idle:
            link = idle.pop()
            if link.usable(now):
                link.reused = True
                return link
            link.close()
        return None

    def _keep(self, link: _Link, port: int) -> None:
        idle = self._idle.setdefault(port, [])
        if link.conn.our_state is h11.DONE and link.conn.their_state is h11.DONE and \
                len(idle) < MAX_IDLE:
            link.conn.start_next_cycle()
            link.idle_since = time.monotonic()
            idle.append(link)
        else:
            link.close()

    async def _body(self, link: _Link, port: int,
                    done: Callable[[], None]) -> AsyncIterator[bytes]:
        finished = False
        try:
            while True:
                event = await _next(link)
                if isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    finished = True
                    return
                else:
                    return
        except (h11.ProtocolError, OSError):
            return  # the replica went away mid-body: the client sees a short response
        finally:
            if finished:
                self._keep(link, port)
            else:
                link.close()
            done()

    async def close(self) -> None:
        for idle in self._idle.values():
            for link in idle:
                link.close()
        self._idle.clear()


def _length(head: h11.Response) -> float:
    """The answer's Content-Length; infinite when it has none (chunked, or until close)."""
    for name, value in head.headers:
        if name == b"content-length":
            return int(value)
    return float("inf")


def _message(request: Request, port: int, upstream: Upstream, body: bytes) -> list[h11.Event]:
    headers: Headers = [(name, value) for name, value in
                        request_headers(request.headers.raw, upstream.prefix, close=False)
                        if name not in FRAMING]
    if not any(name == b"host" for name, _ in headers):
        headers.insert(0, (b"host", f"{LOOPBACK}:{port}".encode()))
    if body or request.method in ("POST", "PUT", "PATCH"):
        headers.append((b"content-length", str(len(body)).encode()))
    events: list[h11.Event] = [h11.Request(method=request.method, target=upstream.target,
                                           headers=headers)]
    if body:
        events.append(h11.Data(data=body))
    return [*events, h11.EndOfMessage()]


async def _connect(port: int) -> _Link:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(LOOPBACK, port),
                                                CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise NotReached(f"nothing answers on {LOOPBACK}:{port}: "
                         f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    return _Link(reader, writer)


async def _ask(link: _Link, message: list[h11.Event]) -> h11.Response:
    """Send the request and read the answer's head; NoAnswer if none came."""
    try:
        link.writer.write(b"".join(link.conn.send(event) or b"" for event in message))
        await link.writer.drain()
        while True:
            event = await _next(link)
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")
    except (OSError, h11.ProtocolError) as exc:
        raise NoAnswer(f"the replica did not answer: {exc or type(exc).__name__}") from None


async def _next(link: _Link) -> h11.Event | type[h11.PAUSED]:
    while True:
        event = link.conn.next_event()
        if event is not h11.NEED_DATA:
            return event  # type: ignore[return-value]
        with contextlib.suppress(ConnectionResetError):
            link.conn.receive_data(await link.reader.read(READ))
            continue
        link.conn.receive_data(b"")  # reset: as if closed
