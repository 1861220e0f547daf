"""Fuzzing of the agent protocol (hypothesis): random and mutated frames over the real agent
WebSocket of a served coordinator, while a well-behaved agent runs a job beside them.

Each example connects the fuzzed node anew, says hello (sometimes a mutated one), sends a few
frames — binary garbage, random text, truncated JSON, unknown types, valid messages with a
field replaced by a wrong type or a huge value, removed or added — then a heartbeat as a probe.
Properties:

- the fuzzed session either goes on (the probe is acknowledged) or is closed with a protocol
  code (1003 malformed, 1008 policy) and a reason; a frame that is not JSON always closes it;
- the other agent is unaffected: its heartbeat and log chunk are acknowledged, its job is still
  RUNNING on its node, and its log holds exactly what it sent;
- the coordinator keeps serving HTTP.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fake_agent import FakeAgent
from fuzzing import Bridge, budget, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from server_harness import Live, capabilities, place_job, until

from bourse.protocol.agent import (
    MAX_SEQ,
    Ack,
    Error,
    Heartbeat,
    Hello,
    JobEvent,
    LogChunk,
    Metrics,
    envelope,
)
from bourse.protocol.common import AttemptRef, Wire
from bourse.protocol.metrics import JobSample, Sample
from bourse.protocol.stream import StreamClose, StreamData, StreamWindow

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXAMPLES = budget(40)
PROTOCOL_CLOSES = {1003, 1008}
HUGE: list[Any] = [2**63, -(2**63) - 1, int("9" * 400), 1e308, float("inf"), float("nan"),
                   "x" * 70_000, [0] * 5_000, {"k" * 200: None}]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=16),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=6)


@dataclass
class Frame:
    """One thing sent on the socket, and whether it is JSON at all."""

    payload: str | bytes
    json_ok: bool = True


@dataclass
class Scene:
    """The good agent's running job, and valid messages to start mutating from."""

    job_id: str
    attempt: int
    templates: list[Wire] = field(default_factory=list)


def templates(job_id: str, attempt: int) -> list[Wire]:
    """Valid agent messages; those about a job name the good agent's job, which the fuzzed
    node must never be able to change."""
    own = AttemptRef(job_id=job_id, attempt=attempt)
    sample = Sample(time=1.0, cpu_percent=5.0, memory_bytes=1024)
    return [
        Heartbeat(running=[own], time=1.0),
        JobEvent(job_id=job_id, attempt=attempt, seq=MAX_SEQ, kind="exited", time=1.0,
                 data={"exit_code": 0}),
        LogChunk(job_id=job_id, attempt=attempt, seq=MAX_SEQ, stream="stdout", offset=0,
                 data=base64.b64encode(b"not mine\n").decode(), time=1.0),
        Metrics(jobs=[JobSample(job_id=job_id, attempt=attempt, **sample.model_dump())],
                node=sample),
        Ack(ids=["x"]), Error(message="agent error", ref="x"),
        StreamData(stream=1, data="aGk="), StreamWindow(stream=1, bytes=1024),
        StreamClose(stream=1, exit_code=0),
        hello("fuzzed"),
    ]


def hello(name: str) -> Hello:
    return Hello(name=name, capabilities=capabilities(), keep_alive_s=20.0)


def as_dict(message: Wire, msg_id: str = "fuzz") -> dict[str, Any]:
    return envelope(msg_id, message).model_dump(mode="json")


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*prefix, index))
    return found


def mutate(frame: dict[str, Any], path: tuple[Any, ...], how: str, value: Any) -> Any:
    """The frame with one place replaced, removed, or given an unknown field."""
    if not path:
        return value if how == "replace" else frame
    frame = copy.deepcopy(frame)
    parent = frame
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "replace":
        parent[last] = value
    elif how == "remove" and isinstance(parent, dict):
        del parent[last]
    elif how == "add" and isinstance(parent[last], dict):
        parent[last]["unknown_" + str(len(parent[last]))] = value
    return frame


def dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


@st.composite
def mutated(draw: st.DrawFn, template: Wire) -> Frame:
    frame = as_dict(template, draw(st.text(min_size=1, max_size=8)))
    path = draw(st.sampled_from(paths(frame)))
    how = draw(st.sampled_from(["replace", "replace", "remove", "add"]))
    value = draw(JSON | st.sampled_from(HUGE))
    return Frame(dumps(mutate(frame, path, how, value)))


@st.composite
def truncated(draw: st.DrawFn, template: Wire) -> Frame:
    text = dumps(as_dict(template))
    return Frame(text[:draw(st.integers(0, len(text) - 1))], json_ok=False)


def frames(scene: Scene) -> st.SearchStrategy[Frame]:
    valid = st.sampled_from(scene.templates)
    return st.one_of(
        st.binary(max_size=64).map(lambda b: Frame(b, json_ok=False)),
        st.text(max_size=64).filter(_not_json).map(lambda t: Frame(t, json_ok=False)),
        valid.flatmap(truncated),
        valid.flatmap(mutated),
        valid.flatmap(mutated),
        valid.map(lambda m: Frame(dumps(as_dict(m)))),
        st.text(min_size=1, max_size=64).map(
            lambda t: Frame(dumps({"v": 1, "id": "u", "type": t, "body": {}}))),
    )


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


@st.composite
def openings(draw: st.DrawFn) -> Frame:
    """The first frame: mostly a valid hello, else a mutated one."""
    if draw(st.integers(0, 3)):
        return Frame(dumps(as_dict(hello("fuzzed"))))
    return draw(mutated(hello("fuzzed")))


class Session:
    """One example: the fuzzed node's connection, and the checks around it."""

    def __init__(self, live: Live, scene: Scene, good: FakeAgent,
                 fuzzed: Callable[[], FakeAgent]) -> None:
        self.live, self.scene, self.good, self.fuzzed = live, scene, good, fuzzed
        self.count = self.offset = 0  # examples played; bytes the good agent logged

    async def play(self, opening: Frame, sent: list[Frame]) -> None:
        self.count += 1
        agent = self.fuzzed()
        await agent.open()
        try:
            for frame in [opening, *sent]:
                if agent.close_code is not None:
                    break
                await agent.send_raw(frame.payload)  # type: ignore[arg-type]
            await self.probe(agent, any(not f.json_ok for f in [opening, *sent]))
        finally:
            await agent.close()
        await self.others_unaffected()

    async def probe(self, agent: FakeAgent, must_close: bool) -> None:
        """The session goes on (a heartbeat is acknowledged) or was closed cleanly."""
        probe = f"probe-{self.count}"
        if agent.close_code is None:
            beat = as_dict(Heartbeat(time=1.0), probe)
            try:
                await agent.send_raw(dumps(beat))
                await agent.wait_acked(probe)
            except ConnectionError:
                pass
        if must_close or agent.close_code is not None:
            code = await agent.wait_closed()
            assert code in PROTOCOL_CLOSES, (code, agent.close_reason)
            assert agent.close_reason, code

    async def others_unaffected(self) -> None:
        await self.good.send(Heartbeat(
            running=[AttemptRef(job_id=self.scene.job_id, attempt=self.scene.attempt)],
            time=1.0))
        line = f"line {self.count}\n".encode()
        await self.good.log(self.scene.job_id, self.scene.attempt, self.count, line,
                            offset=self.offset)
        self.offset += len(line)
        job = await self.live.exchange.job(self.scene.job_id)
        assert job["state"] == "RUNNING", job
        assert [a["node_id"] for a in job["attempts"]] == [self.good.node_id], job
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{self.live.http_url}/healthz")).status_code == 200


async def test_bad_frames_never_hurt_the_hub_or_other_agents(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    good = await agent_factory("good")
    job_id, attempt = await place_job(live.exchange, good)
    await good.event(job_id, attempt, "accepted")
    await good.event(job_id, attempt, "started", pid=1)
    node_id, credential = await live.exchange.enroll("fuzzed")
    scene = Scene(job_id, attempt, templates(job_id, attempt))
    session = Session(live, scene, good, lambda: FakeAgent(
        live.ws_url, node_id, credential, capabilities(), name="fuzzed"))
    bridge = Bridge()

    @fuzz_settings(EXAMPLES)
    @given(opening=openings(), sent=st.lists(frames(scene), min_size=1, max_size=4))
    def check(opening: Frame, sent: list[Frame]) -> None:
        bridge.run(session.play(opening, sent))

    await bridge.call(check)
    logs = (await live.exchange.client.get(f"/api/v1/jobs/{job_id}/logs")).json()
    text = b"".join(base64.b64decode(c["data"]) for c in logs["chunks"]).decode()
    assert "not mine" not in text
    assert text.count("line ") == session.count > 0
    await until(lambda: _forgotten(live, node_id))


async def _forgotten(live: Live, node_id: str) -> bool:
    return not live.exchange.state.hub.connected(node_id)
