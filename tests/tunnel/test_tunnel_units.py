"""The tunnel's pure parts: port declarations, the proxy's header rules, flow control, the
app API's ports and TensorBoard launcher."""

from __future__ import annotations

import asyncio
import base64

import pytest
from pydantic import ValidationError

from bourse.app.work import Work
from bourse.core.errors import Conflict, InvalidInput
from bourse.protocol.common import JobSpec, Port, Wire, parse_port
from bourse.protocol.stream import (
    CHUNK,
    WINDOW,
    ExecTarget,
    PortTarget,
    StreamClose,
    StreamData,
    StreamOpen,
    StreamOpened,
    StreamWindow,
)
from bourse.server.serving.forward import _reached
from bourse.server.streams.proxy import request_headers, response_headers
from bourse.server.streams.tunnels import Tunnels, Unreachable
from bourse.tunnel.stream import Stream, StreamClosed


@pytest.mark.parametrize(("text", "port"), [
    ("6006", Port(number=6006)), ("6006:keep", Port(number=6006, path="keep")),
    ("8080:strip", Port(number=8080)), (" 1024 ", Port(number=1024))])
def test_ports_parse(text: str, port: Port) -> None:
    assert parse_port(text) == port


@pytest.mark.parametrize("text", ["80", "65536", "http", "6006:absolute", "", "-1"])
def test_bad_ports_say_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match="1024 to 65535"):
        parse_port(text)


@pytest.mark.parametrize("ports", [[80], [6006, 6006], list(range(2000, 2009)), [70000]])
def test_a_spec_refuses_bad_port_lists(ports: list[int]) -> None:
    with pytest.raises(ValidationError):
        JobSpec(command=["x"], ports=ports)


def test_a_spec_takes_bare_numbers() -> None:
    spec = JobSpec(command=["x"], ports=[6006, {"number": 7000, "path": "keep"}])
    assert spec.port(7000) == Port(number=7000, path="keep")
    assert spec.port(7001) is None


def test_credentials_never_reach_the_job_and_its_cookie_cannot_replace_the_session() -> None:
    sent = request_headers([(b"Host", b"ex:1"), (b"Authorization", b"Bearer s"),
                            (b"Cookie", b"bourse_session=s; a=1"), (b"Connection", b"x"),
                            (b"X-Forwarded-Prefix", b"/fake"), (b"Accept", b"*/*")],
                           "/jobs/j/ports/1")
    assert sent == [(b"host", b"ex:1"), (b"cookie", b"a=1"), (b"accept", b"*/*"),
                    (b"x-forwarded-prefix", b"/jobs/j/ports/1"), (b"connection", b"close")]
    back = response_headers([(b"Set-Cookie", b"bourse_session=x"), (b"Set-Cookie", b"a=1"),
                             (b"Transfer-Encoding", b"chunked"), (b"Content-Type", b"t")])
    assert back == [(b"set-cookie", b"a=1"), (b"content-type", b"t")]


def _data(stream_id: int, size: int) -> StreamData:
    return StreamData(stream=stream_id, data=base64.b64encode(b"x" * size).decode())


def test_a_writer_stops_at_the_window_and_goes_on_with_credit() -> None:
    async def scenario() -> tuple[int, int]:
        sent: list[object] = []
        stream = Stream(1, sent.append)
        writer = asyncio.create_task(stream.write(b"y" * (WINDOW + CHUNK)))
        await asyncio.sleep(0.01)
        before = sum(len(base64.b64decode(m.data)) for m in sent if isinstance(m, StreamData))
        stream.receive(StreamWindow(stream=1, bytes=CHUNK))
        await asyncio.wait_for(writer, 1)
        after = sum(len(base64.b64decode(m.data)) for m in sent if isinstance(m, StreamData))
        return before, after

    assert asyncio.run(scenario()) == (WINDOW, WINDOW + CHUNK)


def test_a_peer_overrunning_its_window_resets_the_stream_and_reading_grants_credit() -> None:
    async def scenario() -> tuple[list[object], list[object]]:
        sent: list[object] = []
        stream = Stream(1, sent.append)
        for _ in range(WINDOW // CHUNK):
            stream.receive(_data(1, CHUNK))
        await stream.read()
        granted = list(sent)
        stream.receive(_data(1, CHUNK))  # within the credit just granted
        stream.receive(_data(1, CHUNK))  # beyond it
        with pytest.raises(StreamClosed):
            await stream.write(b"z")
        return granted, sent[len(granted):]

    granted, after = asyncio.run(scenario())
    assert granted == [StreamWindow(stream=1, bytes=CHUNK)]
    assert isinstance(after[0], StreamClose) and "window" in (after[0].error or "")


def test_work_declares_its_ports_and_tensorboard() -> None:
    work = Work("cpu", ports=[8888, "7000:keep"], tensorboard="logs")
    assert work.port_specs() == [Port(number=8888), Port(number=7000, path="keep"),
                                 Port(number=6006, path="keep")]
    assert work.launch(["python", "x.py"]) == [
        "python", "-m", "bourse.app.tensorboard", "logs", "6006", "--", "python", "x.py"]
    assert Work("cpu").launch(["python"]) == ["python"]
    with pytest.raises(InvalidInput, match="1024 to 65535"):
        Work("cpu", ports=[80]).port_specs()


class Carrier:
    def __init__(self, node_id: str, features: frozenset[str] = frozenset({"streams"})) -> None:
        self.node_id, self.features = node_id, features
        self.sent: list[object] = []

    def send(self, message: object) -> None:
        self.sent.append(message)


def test_streams_open_on_their_node_and_only_it_can_write_into_them() -> None:
    async def scenario() -> None:
        tunnels, node, other = Tunnels(), Carrier("n1"), Carrier("n2")
        opening = asyncio.create_task(tunnels.open(node, "j1", 1, PortTarget(port=8000)))
        await asyncio.sleep(0)
        request = node.sent[0]
        assert isinstance(request, StreamOpen) and request.target == PortTarget(port=8000)
        tunnels.deliver(other, StreamOpened(stream=request.stream))  # not its stream
        await asyncio.sleep(0.01)
        assert not opening.done()
        tunnels.deliver(node, StreamOpened(stream=request.stream))
        stream = await opening
        tunnels.deliver(other, _data(stream.id, 5))
        tunnels.deliver(node, _data(stream.id, 3))
        assert await stream.read() == (1, b"xxx")
        tunnels.drop(node)
        assert await stream.read() == (1, b"")
        assert stream.closed is not None and "n1" in (stream.closed.error or "")
        assert tunnels.count(node) == 0

    asyncio.run(scenario())


def test_a_refused_stream_says_why_and_old_agents_are_not_asked() -> None:
    async def scenario() -> None:
        tunnels, node = Tunnels(), Carrier("n1")
        opening = asyncio.create_task(tunnels.open(node, "j1", 1, ExecTarget(argv=["pwd"])))
        await asyncio.sleep(0)
        stream_id = node.sent[0].stream  # type: ignore[attr-defined]
        tunnels.deliver(node, StreamClose(stream=stream_id, error="port 1 is not declared"))
        with pytest.raises(Unreachable, match="not declared"):
            await opening
        with pytest.raises(Conflict, match="upgrade"):
            await tunnels.open(Carrier("old", frozenset()), "j1", 1, PortTarget(port=8000))
        with pytest.raises(Unreachable, match="did not open"):
            await tunnels.open(node, "j1", 1, PortTarget(port=8000), timeout=0.01)
        assert tunnels.count(node) == 0

    asyncio.run(scenario())


def test_a_started_stream_takes_data_before_the_node_confirms_it() -> None:
    """The gateway writes its request right after asking for the stream (no round trip);
    a refusal that comes after says the request never reached the replica."""
    async def scenario() -> None:
        tunnels, node = Tunnels(), Carrier("n1")
        stream, answer = tunnels.start(node, "j1", 1, PortTarget(port=8000))
        await stream.write(b"GET / HTTP/1.1\r\n\r\n")
        assert [type(m).__name__ for m in node.sent] == ["StreamOpen", "StreamData"]
        tunnels.deliver(node, StreamOpened(stream=stream.id))
        await tunnels.confirm(node, stream, answer)
        assert not _refused(answer)
        refused, no = tunnels.start(node, "j1", 1, PortTarget(port=8001))
        tunnels.deliver(node, StreamClose(stream=refused.id, error="nothing answers"))
        with pytest.raises(StreamClosed):
            await refused.write(b"GET / HTTP/1.1\r\n\r\n")
        with pytest.raises(Unreachable, match="nothing answers"):
            await tunnels.confirm(node, refused, no)
        assert _refused(no) and tunnels.count(node) == 1

    asyncio.run(scenario())


def _refused(answer: asyncio.Future[Wire]) -> bool:
    return not _reached(answer)


@pytest.mark.parametrize("data", ["abc", "a=b=", "YWJj\n", "é", "YW Jj", "YQ==YQ=="])
def test_stream_data_that_is_not_strict_base64_resets_the_stream(data: str) -> None:
    async def scenario() -> list[object]:
        sent: list[object] = []
        stream = Stream(1, sent.append)
        stream.receive(StreamData(stream=1, data=base64.b64encode(b"kept").decode()))
        stream.receive(StreamData(stream=1, data=data))
        assert await stream.read() == (1, b"kept")  # what came before is still read
        with pytest.raises(StreamClosed):
            await stream.write(b"z")
        return sent

    sent = asyncio.run(scenario())
    closes = [m for m in sent if isinstance(m, StreamClose)]
    assert len(closes) == 1 and "not base64" in (closes[0].error or "")
