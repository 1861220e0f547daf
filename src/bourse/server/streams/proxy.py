"""HTTP and WebSocket to a job's port, over a stream (``bourse.tunnel.stream``).

The coordinator speaks HTTP/1.1 (h11) and the WebSocket protocol (websockets' sans-I/O client)
itself on the stream, one connection per request, and relays what comes back. Nothing is
rewritten — not bodies, not redirects, not cookies — except three things: the path (the
``/jobs/{id}/ports/{port}`` prefix is cut unless the port keeps it; ``X-Forwarded-Prefix`` says
what it was), hop-by-hop headers, and the exchange's own credentials, which never reach the
job: ``Authorization`` and the UI's session cookie are dropped from requests, and a response
cannot set that cookie.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass

import h11
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.client import ClientProtocol
from websockets.frames import Close, Frame, Opcode
from websockets.http11 import Response as WsResponse
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from bourse.server.http.cookie import COOKIE
from bourse.tunnel.stream import Stream, StreamClosed

HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate",
                        b"proxy-connection", b"proxy-authorization", b"te", b"trailer",
                        b"upgrade", b"authorization"})
MAX_WS_MESSAGE = 16 * 1024 * 1024
Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Upstream:
    """Where a proxied request goes: the path the job's server sees and the prefix cut off."""

    target: str  # path and query, as sent upstream
    prefix: str


def request_headers(raw: Iterable[tuple[bytes, bytes]], prefix: str, *,
                    close: bool = True) -> Headers:
    """The client's headers, minus hop-by-hop ones and the exchange's credentials;
    ``close``: ask the job's server to close the connection after its answer (one connection
    per request, as over a stream), else leave it open for the next (a pooled one)."""
    kept: Headers = []
    for name, value in raw:
        lower = name.lower()
        if (lower in HOP_BY_HOP or lower.startswith(b"sec-websocket-")
                or lower == b"x-forwarded-prefix"):
            continue
        if lower == b"cookie":
            cookie = _without_session(value)
            if cookie:
                kept.append((lower, cookie))
            continue
        kept.append((lower, value))
    kept.append((b"x-forwarded-prefix", prefix.encode()))
    if close:
        kept.append((b"connection", b"close"))
    return kept


def _without_session(cookie: bytes) -> bytes:
    pairs = [p.strip() for p in cookie.split(b";")]
    return b"; ".join(p for p in pairs if p and p.split(b"=", 1)[0].strip() != COOKIE.encode())


def response_headers(raw: Iterable[tuple[bytes, bytes]]) -> Headers:
    """The job's headers, minus hop-by-hop ones, framing (re-done by our server) and any
    attempt to set the exchange's session cookie."""
    kept: Headers = []
    for name, value in raw:
        lower = name.lower()
        if lower in HOP_BY_HOP or lower == b"transfer-encoding":
            continue
        if lower == b"set-cookie" and value.split(b"=", 1)[0].strip() == COOKIE.encode():
            continue
        kept.append((lower, value))
    return kept


# --- HTTP ----------------------------------------------------------------------------------

class BadGateway(Exception):
    """The job's server answered with something that is not HTTP, or went away."""


async def proxy_http(request: Request, stream: Stream, upstream: Upstream,
                     done: Callable[[], None], *, body: bytes | None = None,
                     opened: Callable[[], Awaitable[None]] | None = None) -> StreamingResponse:
    """Send the request down ``stream`` and relay the response as it arrives; ``done`` is
    called once the stream is no longer needed. BadGateway before the response starts.
    ``body``: the request's body read already (the gateway keeps it to retry), else it is
    streamed from the request. ``opened``: awaited once the request is sent, before its
    answer is read, for a stream written to before the node confirmed it (``Tunnels.start``);
    what it raises is raised."""
    conn = h11.Connection(h11.CLIENT)
    try:
        await _send(stream, conn, h11.Request(method=request.method, target=upstream.target,
                                              headers=request_headers(request.headers.raw,
                                                                      upstream.prefix)))
        chunks = _once(body) if body is not None else request.stream()
        async for chunk in chunks:
            if chunk:
                await _send(stream, conn, h11.Data(data=chunk))
        await _send(stream, conn, h11.EndOfMessage())
        if opened is not None:
            await opened()
        response = await _head(stream, conn)
    except (h11.ProtocolError, StreamClosed) as exc:
        done()
        raise BadGateway(_why(stream, exc)) from None
    except BaseException:
        done()
        raise
    relayed = StreamingResponse(_body(stream, conn, done), status_code=response.status_code,
                                background=after(done))
    relayed.raw_headers = response_headers(response.headers.raw_items())
    return relayed


def after(done: Callable[[], None]) -> BackgroundTask:
    """``done`` run after the response, in the event loop: Starlette runs a plain function
    given as a background task in its thread pool — a thread hop per request, which cost
    more CPU than the rest of the gateway's path (profiled)."""
    async def run() -> None:
        done()

    return BackgroundTask(run)


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body


async def probe_http(stream: Stream, path: str) -> int:
    """``GET path`` down ``stream``: the status it answers (BadGateway if it does not)."""
    conn = h11.Connection(h11.CLIENT)
    try:
        await _send(stream, conn, h11.Request(method="GET", target=path, headers=[
            (b"host", b"127.0.0.1"), (b"connection", b"close"),
            (b"user-agent", b"bourse-readiness")]))
        await _send(stream, conn, h11.EndOfMessage())
        return (await _head(stream, conn)).status_code
    except (h11.ProtocolError, StreamClosed) as exc:
        raise BadGateway(_why(stream, exc)) from None


def _why(stream: Stream, exc: Exception) -> str:
    if stream.closed is not None and stream.closed.error:
        return stream.closed.error
    return f"the job's server did not answer with HTTP: {exc}"


async def _send(stream: Stream, conn: h11.Connection, event: h11.Event) -> None:
    data = conn.send(event)
    if data:
        await stream.write(data)


async def _next(stream: Stream, conn: h11.Connection) -> h11.Event | type[h11.PAUSED]:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event  # type: ignore[return-value]
        conn.receive_data((await stream.read())[1])  # b"": the server closed


async def _head(stream: Stream, conn: h11.Connection) -> h11.Response:
    while True:
        event = await _next(stream, conn)
        if isinstance(event, h11.Response):
            return event
        if not isinstance(event, h11.InformationalResponse):
            raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")


async def _body(stream: Stream, conn: h11.Connection,
                done: Callable[[], None]) -> AsyncIterator[bytes]:
    try:
        while isinstance(event := await _next(stream, conn), h11.Data):
            yield bytes(event.data)
    except (h11.ProtocolError, StreamClosed):
        return  # the job's server went away mid-body: the client sees a short response
    finally:
        done()


# --- WebSocket -----------------------------------------------------------------------------

class WsUpstream:
    """The WebSocket client side, on the stream: handshake, frames both ways, reassembly."""

    def __init__(self, stream: Stream, host: str, upstream: Upstream,
                 subprotocols: list[str]) -> None:
        self.stream = stream
        self.protocol = ClientProtocol(parse_uri(f"ws://{host}{upstream.target}"),
                                       subprotocols=[Subprotocol(p) for p in subprotocols]
                                       or None, max_size=MAX_WS_MESSAGE)
        self._lock = asyncio.Lock()
        self._parts: list[bytes] = []
        self._opcode = Opcode.TEXT
        self._eof = False
        self._early: list[object] = []

    async def handshake(self, headers: Headers) -> WsResponse:
        request = self.protocol.connect()
        for name, value in headers:
            if name.decode("latin-1") not in request.headers and name != b"host":
                request.headers[name.decode("latin-1")] = value.decode("latin-1")
        self.protocol.send_request(request)
        await self.flush()
        while True:
            events = await self._receive()
            for i, event in enumerate(events):
                if isinstance(event, WsResponse):
                    self._early = events[i + 1:]  # frames that came with the answer
                    return event
            if self._eof or self.protocol.close_expected():
                raise BadGateway(_why(self.stream, Exception("no handshake answer")))

    async def flush(self) -> None:
        async with self._lock:
            for data in self.protocol.data_to_send():
                if data:
                    await self.stream.write(data)
                else:
                    self.stream.write_eof()

    async def _receive(self) -> list[object]:
        if self._eof:
            return []
        data = (await self.stream.read())[1]
        if data:
            self.protocol.receive_data(data)
        else:
            self._eof = True
            self.protocol.receive_eof()
        events = self.protocol.events_received()
        await self.flush()  # pongs, close answers
        return list(events)

    async def to_client(self, ws: WebSocket) -> Close | None:
        """Relay the job's messages to ``ws`` until either side closes; the job's close."""
        while True:
            events, self._early = self._early or await self._receive(), []
            for event in events:
                if isinstance(event, Frame):
                    close = await self._relay(ws, event)
                    if close is not None:
                        return close
            if self._eof or self.protocol.close_expected():
                return None

    async def _relay(self, ws: WebSocket, frame: Frame) -> Close | None:
        if frame.opcode is Opcode.CLOSE:
            return Close.parse(frame.data) if frame.data else Close(1005, "")
        if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
            self._opcode, self._parts = frame.opcode, []
        if frame.opcode not in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
            return None
        self._parts.append(bytes(frame.data))
        if frame.fin:
            message = b"".join(self._parts)
            self._parts = []
            if self._opcode is Opcode.TEXT:
                await ws.send_text(message.decode("utf-8", "replace"))
            else:
                await ws.send_bytes(message)
        return None

    async def from_client(self, ws: WebSocket) -> None:
        """Relay the client's messages to the job until the client goes away."""
        try:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    self.protocol.send_close(1000)
                    await self.flush()
                    return
                if message.get("text") is not None:
                    self.protocol.send_text(message["text"].encode())
                elif message.get("bytes") is not None:
                    self.protocol.send_binary(message["bytes"])
                await self.flush()
        except WebSocketDisconnect:
            with contextlib.suppress(Exception):
                self.protocol.send_close(1000)
                await self.flush()


async def proxy_websocket(ws: WebSocket, stream: Stream, upstream: Upstream) -> None:
    """Handshake with the job's server first; accept the client only if it accepted."""
    client = WsUpstream(stream, ws.headers.get("host", "localhost"), upstream,
                        _subprotocols(ws))
    try:
        answer = await client.handshake(request_headers(ws.headers.raw, upstream.prefix))
    except (BadGateway, StreamClosed, OSError):
        await ws.close(code=1011)
        return
    if answer.status_code != 101:
        await ws.close(code=1008, reason=f"the job's server answered {answer.status_code}")
        return
    await ws.accept(subprotocol=client.protocol.subprotocol)
    upward = asyncio.create_task(client.from_client(ws))
    try:
        close = await client.to_client(ws)
    except StreamClosed:
        close = None
    finally:
        upward.cancel()
        await asyncio.gather(upward, return_exceptions=True)
    with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
        await ws.close(code=close.code if close and close.code not in (1005, 1006) else 1000,
                       reason=close.reason if close else "")


def _subprotocols(ws: WebSocket) -> list[str]:
    header = ws.headers.get("sec-websocket-protocol", "")
    return [p.strip() for p in header.split(",") if p.strip()]
