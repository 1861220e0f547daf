"""``/metrics``: a gauge for every state a node row can hold, each reached the way the exchange
reaches it (enrolment, a hello, silence, a reclaim)."""

from __future__ import annotations

import re

import pytest
from fake_agent import FakeAgent
from server_harness import Live, capabilities

from bourse.core.states import NodeState
from bourse.protocol import api

pytestmark = pytest.mark.anyio


def _gauges(text: str, name: str) -> dict[str, float]:
    return {state: float(value) for state, value in
            re.findall(rf'^{name}{{state="(\w+)"}} (\S+)$', text, re.MULTILINE)}


async def test_the_node_gauge_counts_every_state_zero_included(live: Live) -> None:
    exchange = live.exchange
    await exchange.enroll("silent")  # never connects: lost after three keep-alive intervals
    exchange.clock.advance(120)
    await exchange.tick()
    before = _gauges((await exchange.client.get("/metrics")).text, "bourse_nodes")
    zero = {"launching": 0, "booting": 0, "terminated": 0}  # the exchange launched none
    assert before == {"offline": 0, "online": 0, "lost": 1, "reclaimed": 0} | zero

    await exchange.enroll("waiting")  # enrolled, its agent not connected yet
    agents = []
    for name, spot in (("up", False), ("spot", True)):
        node_id, credential = await exchange.enroll(name)
        caps = capabilities().model_copy(update={"interruptible": spot,
                                                 "spot_price": 0.05 if spot else None})
        agents.append(FakeAgent(live.ws_url, node_id, credential, caps, name=name))
        await agents[-1].connect()
    reclaim = await exchange.client.post(f"/api/v1/nodes/{agents[1].node_id}/reclaim",
                                         json={"notice_s": 5})
    assert reclaim.status_code == 200, reclaim.text

    text = (await exchange.client.get("/metrics")).text
    assert _gauges(text, "bourse_nodes") == {"offline": 1, "online": 1, "lost": 1,
                                             "reclaimed": 1} | zero
    for agent in agents:
        await agent.close()


def test_the_enum_is_every_state_the_api_reports() -> None:
    assert api.NodeView.model_fields["state"].annotation is NodeState
