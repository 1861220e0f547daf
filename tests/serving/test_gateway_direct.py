"""The gateway's direct path: who shares the coordinator's loopback, and requests sent to a
real HTTP/1.1 server on 127.0.0.1 over pooled connections (``serving.direct``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import h11
import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from bourse.server.serving.direct import Direct, NoAnswer, NotReached
from bourse.server.streams.proxy import Upstream
from bourse.tunnel.loopback import host_mark, mark, same_loopback

OURS = mark("boot-1", "net:[4026531840]")


@pytest.mark.parametrize(("theirs", "peer", "same"), [
    (OURS, "127.0.0.1", True),
    (OURS, "::1", True),
    (OURS, "127.0.0.2", True),
    (mark("boot-1", "net:[4026532999]"), "127.0.0.1", False),  # a container's own network
    (mark("boot-2", "net:[4026531840]"), "127.0.0.1", False),  # another machine
    (OURS, "10.0.0.7", False),  # the right mark from elsewhere: not our loopback
    (None, "127.0.0.1", False),  # an older agent says nothing
    (OURS, None, False),
    (OURS, "not-an-address", False),
])
def test_who_shares_our_loopback(theirs: str | None, peer: str | None, same: bool) -> None:
    assert same_loopback(theirs, OURS, peer) is same


def test_no_mark_here_means_no_match_and_the_mark_hides_the_boot_id() -> None:
    assert not same_loopback(OURS, None, "127.0.0.1")
    assert "boot-1" not in OURS
    assert host_mark() is None or host_mark() == host_mark()


@dataclass
class Replica:
    """A keep-alive HTTP/1.1 server (h11): what each request brought, and from which
    client port; ``drop`` closes the connection instead of answering."""

    seen: list[tuple[int, dict[bytes, bytes], bytes]] = field(default_factory=list)
    drop: bool = False
    chunked: bool = False  # answer without a length: relayed as it comes
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn, peer = h11.Connection(h11.SERVER), writer.get_extra_info("peername")[1]
        with contextlib.suppress(h11.ProtocolError, ConnectionError):
            while True:
                head, body = await _request(conn, reader)
                if head is None:
                    break
                self.seen.append((peer, {k.lower(): v for k, v in head.headers.raw_items()}, body))
                if self.drop:
                    break
                answer = f"ok {len(self.seen)}".encode()
                framing = (b"transfer-encoding", b"chunked") if self.chunked else (
                    b"content-length", str(len(answer)).encode())
                writer.write(conn.send(h11.Response(status_code=201, headers=[
                    framing, (b"x-r", b"1")])))
                writer.write(conn.send(h11.Data(data=answer)) + conn.send(h11.EndOfMessage()))
                await writer.drain()
                conn.start_next_cycle()
        writer.close()


async def _request(conn: h11.Connection,
                   reader: asyncio.StreamReader) -> tuple[h11.Request | None, bytes]:
    head, body = None, b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            if not data:
                return None, b""
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return head, body


@contextlib.asynccontextmanager
async def replica(drop: bool = False, chunked: bool = False) -> AsyncIterator[Replica]:
    server_state = Replica(drop=drop, chunked=chunked)
    server = await asyncio.start_server(server_state.serve, "127.0.0.1", 0)
    server_state.port = server.sockets[0].getsockname()[1]
    async with server:
        yield server_state


def _request_for(method: str, body: bytes = b"") -> Request:
    headers = [(b"host", b"exchange:8000"), (b"authorization", b"Bearer secret"),
               (b"cookie", b"bourse_session=s; theme=dark"), (b"connection", b"keep-alive")]
    if body:
        headers.append((b"transfer-encoding", b"chunked"))  # re-framed for the bytes sent
    return Request({"type": "http", "method": method, "path": "/p", "raw_path": b"/p",
                    "query_string": b"", "headers": headers, "http_version": "1.1"})


async def _read(response: Response) -> bytes:
    if not isinstance(response, StreamingResponse):
        return bytes(response.body)  # read whole: a short answer with a length
    chunks = [c async for c in response.body_iterator]
    return b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in chunks)


@pytest.mark.parametrize("chunked", [False, True])
def test_requests_reuse_one_connection_and_carry_no_credentials(chunked: bool) -> None:
    async def scenario() -> None:
        direct, released = Direct(), []
        upstream = Upstream("/predict?x=1", "/svc/p/web")
        async with replica(chunked=chunked) as server:
            for n in range(3):
                got = await direct.send(_request_for("POST", b"digits"), server.port, upstream,
                                        b"digits", lambda: released.append(1))
                assert isinstance(got, StreamingResponse) is chunked
                assert (got.status_code, await _read(got)) == (201, f"ok {n + 1}".encode())
                assert (b"x-r", b"1") in got.raw_headers
            await direct.close()
        assert len(released) == 3
        assert len({peer for peer, _, _ in server.seen}) == 1  # kept alive, not reopened
        _, headers, body = server.seen[0]
        assert body == b"digits" and headers[b"content-length"] == b"6"
        assert b"authorization" not in headers and b"transfer-encoding" not in headers
        assert headers[b"cookie"] == b"theme=dark"
        assert headers[b"x-forwarded-prefix"] == b"/svc/p/web"
        assert headers[b"host"] == b"exchange:8000"
        assert headers.get(b"connection") != b"close"

    asyncio.run(scenario())


def test_a_closed_port_sent_nothing_and_a_dropped_request_had_no_answer() -> None:
    async def scenario() -> None:
        direct, released = Direct(), []
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            closed_port = free.getsockname()[1]
        with pytest.raises(NotReached, match="nothing answers"):
            await direct.send(_request_for("GET"), closed_port, Upstream("/", "/svc/p/w"),
                              b"", lambda: released.append(1))
        async with replica(drop=True) as server:
            with pytest.raises(NoAnswer, match="did not answer"):
                await direct.send(_request_for("POST", b"x"), server.port,
                                  Upstream("/", "/svc/p/w"), b"x", lambda: released.append(2))
        await direct.close()
        assert released == [1, 2]
        assert len(server.seen) == 1  # it reached the replica: not retried if a POST

    asyncio.run(scenario())


class _Local:
    """Every replica's node shares our loopback (its connection says so)."""

    direct = True

    def get(self, node_id: str) -> _Local:
        return self


def _sent(method: str, body: bytes = b"") -> Request:
    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(_request_for(method, body).scope, receive)


def test_a_get_that_got_no_answer_goes_to_another_replica_and_a_post_never_does() -> None:
    from bourse.server.serving.forward import Forwarder
    from bourse.server.serving.gateway import Gateway, ReplicaInfo
    from bourse.server.streams.tunnels import Unreachable

    async def scenario() -> None:
        gateway, upstream = Gateway(), Upstream("/predict", "/svc/p/web")
        async with replica(drop=True) as dropping, replica() as good:
            route = gateway.sync("s-1", "p", "web", {1: 100}, [
                ReplicaInfo(job, 1, server.port, f"n-{job}", 1, 0.0, "/", 1.0, 0.0)
                for job, server in (("drop", dropping), ("good", good))])

            def ready() -> None:  # both in the rotation, the dropping one tried first
                for job, last in (("drop", 0.0), ("good", 1.0)):
                    route.replicas[job].ready, route.replicas[job].last = True, last

            forwarder = Forwarder(gateway, tunnels=None, connections=_Local(),  # type: ignore[arg-type]
                                  direct=Direct())
            ready()
            answer = await forwarder.forward(_sent("GET"), route, upstream)
            assert answer.status_code == 201 and (len(dropping.seen), len(good.seen)) == (1, 1)
            assert not route.replicas["drop"].ready  # out of the rotation at once
            ready()
            with pytest.raises(Unreachable, match="did not answer"):
                await forwarder.forward(_sent("POST", b"x"), route, upstream)
            assert (len(dropping.seen), len(good.seen)) == (2, 1)  # a POST is never sent twice
            assert all(r.outstanding == 0 for r in route.replicas.values())
            assert forwarder.direct is not None
            await forwarder.direct.close()

    asyncio.run(scenario())
