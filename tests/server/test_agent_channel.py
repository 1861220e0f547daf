"""The agent WebSocket through a real uvicorn server: handshake, framing, connections.

Fake agents speak ``bourse.protocol.agent`` with the ``websockets`` client library.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from fake_agent import FakeAgent
from pydantic import ValidationError
from server_harness import (
    NOTHING_CONNECTED,
    Exchange,
    Live,
    capabilities,
    place_job,
    until,
    until_disconnected,
)
from sqlalchemy import delete, make_url
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from bourse.protocol.agent import AGENT_TO_SERVER, Ack, Error, Heartbeat, Hello, JobEvent
from bourse.server.db.schema import Node

pytestmark = pytest.mark.anyio
CLOSE_MALFORMED, CLOSE_POLICY, CLOSE_REPLACED = 1003, 1008, 4000


async def _node(exchange: Exchange, node_id: str) -> dict[str, Any]:
    response = await exchange.client.get(f"/api/v1/nodes/{node_id}")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def test_hello_registers_the_node_online(live: Live,
                                               agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory("box-1", connect=False, cpus=8, memory_gib=64,
                                           gpus=2, keep_alive_s=15)
    assert (await _node(exchange, agent.node_id))["state"] == "offline"
    exchange.clock.advance(3)
    welcome = await agent.connect()
    assert welcome == {"node_id": agent.node_id, "keep_alive_s": 15,
                       "server_time": exchange.clock(),
                       "accepts": ["metrics", "interruption", "track"],
                       "loss_window_s": 45.0}  # three keep-alives: the tests' window
    node = await _node(exchange, agent.node_id)
    assert (node["state"], node["connected"], node["keep_alive_s"]) == ("online", True, 15)
    assert node["last_seen"] == exchange.clock()
    caps = node["capabilities"]
    assert (caps["cpus"], caps["memory_gib"]) == (8, 64)
    assert [g["model"] for g in caps["gpus"]] == ["a100-80gb", "a100-80gb"]


async def test_a_heartbeat_is_acknowledged_and_refreshes_last_seen(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    live.exchange.clock.advance(10)
    await agent.heartbeat()
    assert (await live.exchange.node_row(agent.node_id)).last_seen == live.exchange.clock()


@pytest.mark.parametrize("kind", ["user", "enroll", "wrong", "missing"])
async def test_only_a_node_credential_opens_the_channel(live: Live, kind: str) -> None:
    exchange = live.exchange
    secrets = {"user": exchange.admin_token, "wrong": "bse_n_" + "x" * 43, "missing": ""}
    if kind == "enroll":
        secrets["enroll"] = (await exchange.client.post("/api/v1/enrollments",
                                                        json={})).json()["token"]
    headers = {"Authorization": f"Bearer {secrets[kind]}"} if secrets[kind] else {}
    with pytest.raises(InvalidStatus) as refused:
        async with connect(live.ws_url, additional_headers=headers):
            pass
    assert refused.value.response.status_code == 403


async def test_the_first_frame_must_be_a_hello(live: Live,
                                               agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory(connect=False)
    await agent.open()
    await agent.send(Heartbeat(time=0.0), ack=False)
    assert await agent.wait_closed() == CLOSE_POLICY
    node = await _node(live.exchange, agent.node_id)
    assert (node["state"], node["connected"]) == ("offline", False)


async def test_a_hello_with_infinity_is_refused_and_the_node_stays_offline(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    """Found by the fuzzer: on PostgreSQL, storing the capabilities failed inside the hub
    (an abnormal close, 1006) and left the node listed as connected."""
    agent: FakeAgent = await agent_factory(connect=False)
    await agent.open()
    hello = json.loads(agent.frame(Hello(name="inf", capabilities=capabilities(),
                                         keep_alive_s=20.0)))
    hello["body"]["capabilities"]["disk_free_gib"] = float("inf")
    await agent.send_raw(json.dumps(hello))
    assert await agent.wait_closed() == CLOSE_POLICY
    assert not live.exchange.state.hub.connected(agent.node_id)
    node = await _node(live.exchange, agent.node_id)
    assert (node["state"], node["connected"]) == ("offline", False)


async def test_a_hello_that_cannot_be_recorded_leaves_the_node_unlisted(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    """A hello whose write fails (here the node's row is gone, its credential still valid)
    ends the session, and the hub does not keep listing the node as connected (it did)."""
    agent: FakeAgent = await agent_factory(connect=False)
    async with live.exchange.state.db.write() as session:
        await session.execute(delete(Node).where(Node.id == agent.node_id))
    with pytest.raises(ConnectionError):
        await agent.connect()
    assert await agent.wait_closed()
    assert not live.exchange.state.hub.connected(agent.node_id)


async def test_an_unknown_message_type_gets_an_error_and_the_connection_stays(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    await agent.send_raw(json.dumps({"v": 1, "id": "m-1", "type": "telemetry",
                                     "body": {"gpu_util": 0.5}}))
    error = await agent.expect("error", ref="m-1")
    assert "telemetry" in error["message"]
    await agent.heartbeat()  # still open and served
    assert agent.close_code is None


@pytest.mark.parametrize("frame", [
    "not json at all",
    json.dumps([1, 2, 3]),
    json.dumps({"v": 1, "type": "heartbeat", "body": {}}),  # no id
    json.dumps({"v": 1, "id": "m", "type": "job_event", "body": {"job_id": "j-1"}}),
    json.dumps({"v": 1, "id": "m", "type": "log_chunk", "body": {
        "job_id": "j-1", "attempt": 0, "seq": 0, "stream": "stdout", "offset": 0,
        "data": "", "time": 0}}),
    json.dumps({"v": 1, "id": "m", "type": "heartbeat", "body": {"running": "all"}}),
    json.dumps({"v": 2, "id": "m", "type": "heartbeat", "body": {"time": 0}}),
    "[" * 100_000,
    # found by the fuzzer: Python reads NaN and Infinity, the JSON columns of PostgreSQL do not
    '{"v": 1, "id": "m", "type": "heartbeat", "body": {"time": Infinity}}',
    '{"v": 1, "id": "m", "type": "job_event", "body": {"job_id": "j-1", "attempt": 1, '
    '"seq": 0, "kind": "info", "time": 0, "data": {"x": NaN}}}',
], ids=["not json", "a list", "no id", "event without fields", "attempt 0", "running a string",
        "protocol 2", "deep nesting", "Infinity", "NaN in event data"])
async def test_a_malformed_frame_closes_only_that_connection(
        live: Live, agent_factory: Callable[..., Any], frame: str) -> None:
    bad: FakeAgent = await agent_factory("bad")
    good: FakeAgent = await agent_factory("good")
    await bad.send_raw(frame)
    assert await bad.wait_closed() == CLOSE_MALFORMED
    await until_disconnected(live.exchange, bad.node_id)
    await good.heartbeat()
    job_id, _ = await place_job(live.exchange, good)
    await good.run_job(job_id, 1)
    assert (await live.exchange.job(job_id))["state"] == "SUCCEEDED"
    assert good.close_code is None
    bad_node = await _node(live.exchange, bad.node_id)
    assert bad_node["connected"] is False


async def test_a_second_connection_replaces_the_first(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    """On PostgreSQL the two transactions (the new connection's hello, the old one's goodbye)
    are forced into the interleaving that, before the goodbye became a compare-and-set, lost
    the new session 9 runs in 15: a row lock on the node holds both until both wait for it."""
    exchange = live.exchange
    first: FakeAgent = await agent_factory("twin")
    second = FakeAgent(live.ws_url, first.node_id, first.credential, capabilities(),
                       name="twin")
    try:
        async with _node_row_locked(exchange, first.node_id, waiters=2):
            hello = asyncio.create_task(second.connect())
        await hello
        assert await first.wait_closed() == CLOSE_REPLACED
        await second.heartbeat()  # the old connection's goodbye has been handled by now
        assert (await _node(exchange, first.node_id))["connected"] is True
        node = await exchange.node_row(first.node_id)
        assert node.session == exchange.state.hub.connections[first.node_id].session
        _, attempt = await place_job(exchange, second)
        assert attempt == 1
        assert first.received("start_job") == []
    finally:
        await second.close()


@contextlib.asynccontextmanager
async def _node_row_locked(exchange: Exchange, node_id: str,
                           waiters: int) -> AsyncIterator[None]:
    """On PostgreSQL: hold the node's row lock until ``waiters`` transactions wait for it.
    On SQLite (one writer at a time, whole transactions): nothing to hold."""
    url = make_url(exchange.state.db.url)
    if url.get_backend_name() != "postgresql":
        yield
        return
    connection = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(
        hide_password=False))
    try:
        async with connection.transaction():
            await connection.execute("SELECT 1 FROM nodes WHERE id = $1 FOR UPDATE", node_id)
            yield

            async def waiting() -> bool:  # in this database (other workers share the server)
                await connection.execute("SELECT pg_stat_clear_snapshot()")  # else stale
                found = await connection.fetchval(
                    "SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a "
                    "ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()")
                return bool(found >= waiters)

            await until(waiting)
    finally:
        await connection.close()


async def test_disconnecting_keeps_the_node_but_takes_it_out_of_placement(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    await agent.close()
    await until_disconnected(exchange, agent.node_id)
    await exchange.state.hub.close_node("nobody", "no such connection")  # a no-op
    job = await exchange.submit()
    report = await exchange.tick()
    assert (report.placed, report.unplaced) == (0, 1)
    node = await _node(exchange, agent.node_id)
    assert node["connected"] is False
    assert (await exchange.node_row(agent.node_id)).session is None
    assert NOTHING_CONNECTED.match((await exchange.job(job["id"]))["pending_reason"])


async def test_a_reconnecting_agent_gets_its_unacknowledged_start_again(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.close()
    await agent.connect()
    start = await agent.expect("start_job")
    assert (start["job_id"], start["attempt"]) == (job_id, attempt)
    assert start["env"] == {"BOURSE_JOB_ID": job_id, "BOURSE_ATTEMPT": "1",
                            "BOURSE_NODE_ID": agent.node_id, "MLFLOW_RUN_ID": job_id,
                            "MLFLOW_TRACKING_URI": live.exchange.config.tracking_url,
                            "BOURSE_URL": live.exchange.config.url}
    await agent.event(job_id, attempt, "accepted")
    await agent.close()
    await agent.connect(running=[(job_id, attempt)])
    await agent.barrier()
    assert agent.received("start_job") == []  # accepted: not sent again
    assert (await exchange.job(job_id))["state"] == "STARTING"


async def test_a_hello_listing_a_stale_attempt_gets_it_cancelled(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    exchange = live.exchange
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent)
    await agent.event(job_id, attempt, "accepted")
    await exchange.client.post(f"/api/v1/jobs/{job_id}/cancel")
    await agent.expect("cancel_job", job_id=job_id)
    await agent.event(job_id, attempt, "exited", exit_code=0)
    await agent.close()
    await agent.connect(running=[(job_id, attempt), ("j-unknown", 3)])
    cancels = [await agent.expect("cancel_job", job_id=j) for j in (job_id, "j-unknown")]
    assert [(c["attempt"], c["stale"], c["grace_s"]) for c in cancels] == [
        (attempt, True, 0), (3, True, 0)]
    assert (await exchange.job(job_id))["state"] == "CANCELLED"


async def test_messages_are_acknowledged_after_they_are_stored(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    """A burst of frames sent without waiting is acknowledged id by id."""
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(live.exchange, agent)
    ids = [await agent.send(JobEvent(job_id=job_id, attempt=attempt, seq=0, kind="accepted",
                                     time=0.0), ack=False)]
    for seq in range(50):
        ids.append(await agent.send(agent.log_chunk(job_id, attempt, seq, b"line\n"),
                                    ack=False))
    await agent.wait_acked(*ids)
    page = (await live.exchange.client.get(f"/api/v1/jobs/{job_id}/logs")).json()
    assert [c["seq"] for c in page["chunks"]] == list(range(50))


def _event(job_id: str, **fields: Any) -> dict[str, Any]:
    return {"job_id": job_id, "attempt": 1, "seq": 0, "kind": "info", "time": 0.0, **fields}


def _chunk(job_id: str, **fields: Any) -> dict[str, Any]:
    return {"job_id": job_id, "attempt": 1, "seq": 0, "stream": "stdout", "offset": 0,
            "data": "", "time": 0.0, **fields}


@dataclass(frozen=True)
class Frame:
    kind: str
    body: Callable[[str], dict[str, Any]]  # of the job id
    breaks_on: tuple[str, ...] = ()  # the databases on which it wedges the agent today


BOTH, POSTGRESQL = ("sqlite", "postgresql"), ("postgresql",)


FRAMES = [
    pytest.param(Frame("job_event", lambda j: _event(j, attempt=2**31)), id="attempt 2**31"),
    pytest.param(Frame("job_event", lambda j: _event(j, seq=2**31)), id="event seq 2**31"),
    pytest.param(Frame("log_chunk", lambda j: _chunk(j, seq=2**31)), id="chunk seq 2**31"),
    pytest.param(Frame("job_event", lambda j: _event(j, seq=2**63)), id="event seq 2**63"),
    pytest.param(Frame("log_chunk", lambda j: _chunk(j, offset=2**63)), id="offset 2**63"),
    pytest.param(Frame("heartbeat", lambda j: {"running": [{"job_id": j, "attempt": 2**63}],
                                                "time": 0.0}), id="heartbeat attempt 2**63"),
    pytest.param(Frame("log_chunk", lambda j: _chunk(j, data="abc")), id="base64 unpadded"),
    pytest.param(Frame("log_chunk", lambda j: _chunk(j, data="a=b=")), id="base64 broken"),
    pytest.param(Frame("log_chunk", lambda j: _chunk(j, data="YW Jj")), id="base64 with a space"),
    pytest.param(Frame("log_chunk", lambda j: _chunk(j, data="YWJj\u00e9")),
                 id="base64 not ascii"),
    pytest.param(Frame("job_event", lambda j: _event(j, data={"reason": "a\x00b"})),
                 id="NUL in an event reason"),
    pytest.param(Frame("job_event", lambda j: _event(j, data={"a\x00": ["\x00"]})),
                 id="NUL in event data"),
    pytest.param(Frame("job_event", lambda j: _event(j, kind="exited",
                                                     data={"exit_code": 2**63}),
                       breaks_on=BOTH), id="exit code 2**63"),
    pytest.param(Frame("job_event", lambda j: _event(j, kind="exited",
                                                     data={"exit_code": 2**40}),
                       breaks_on=POSTGRESQL), id="exit code 2**40"),
]
EXIT_CODE_BUG = (
    "BUG: an exit code beyond the attempts.exit_code column (int4 on PostgreSQL, int8 on "
    "SQLite) is not refused by the protocol (data is a free dict) and the database error "
    "escapes the hub's REFUSED = (DataError, IntegrityError): PostgreSQL raises a plain "
    "DBAPIError ('value out of int32 range' while encoding the argument), SQLite a raw "
    "OverflowError. The connection fails without an ack and the agent replays it forever")


@pytest.mark.parametrize("case", FRAMES)
async def test_a_frame_is_refused_as_malformed_or_acknowledged_never_wedges_the_agent(
        request: pytest.FixtureRequest, live: Live, agent_factory: Callable[..., Any],
        backend: str, case: Frame) -> None:
    """Agents replay whatever was not acknowledged after every reconnect, so a frame must be
    refused at the protocol's edge (closed as malformed: the agent's own models never write
    one) or acknowledged — stored, or dropped and reported — never fail the connection."""
    agent: FakeAgent = await agent_factory()
    job_id, _ = await place_job(live.exchange, agent)
    frame = case.body(job_id)
    await agent.send_raw(json.dumps({"v": 1, "id": "frame-1", "type": case.kind,
                                     "body": frame}))
    try:
        AGENT_TO_SERVER[case.kind].model_validate(frame)
    except ValidationError:
        assert await agent.wait_closed() == CLOSE_MALFORMED
        return
    await agent.wait_acked("frame-1")
    await agent.heartbeat(running=[])
    assert agent.close_code is None


async def test_an_agents_acks_and_errors_are_not_stored_and_errors_are_logged(
        live: Live, agent_factory: Callable[..., Any],
        caplog: pytest.LogCaptureFixture) -> None:
    """Acks of our commands and errors about them need no transaction and get no ack."""
    agent: FakeAgent = await agent_factory()
    ack = await agent.send(Ack(ids=["s:1"]), ack=False)
    error = await agent.send(Error(message="no such attempt here", ref="s:2"), ack=False)
    await agent.heartbeat()  # acknowledged: what was sent before it has been read
    await agent.barrier()
    assert not {ack, error} & agent.acked
    assert "error about s:2: no such attempt here" in caplog.text
