"""Resource samples through the real agent channel: stored, served, judged (stalls, full
disks), rolled up; and the Prometheus endpoint. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent
from server_harness import START, Exchange, Live, open_exchange, place_job

from bourse.core.health import StallRules
from bourse.protocol.agent import Metrics
from bourse.protocol.metrics import DiskSample, GpuSample, JobSample, Sample
from bourse.server.config import MetricsConfig
from bourse.server.metrics.keeper import MetricsKeeper

pytestmark = pytest.mark.anyio
CONFIG = MetricsConfig(stall=StallRules(after_s=30.0), raw_retention_s=3600.0,
                       retention_s=86400.0)
GIB = 2**30
# the two RTX A5000 of xml-rtx-a5000-x2-drv590.xml: held by a llama-server, both at 0 %
IDLE_GPUS = [GpuSample(index=0, utilization_percent=0.0, memory_used_mib=22430.0,
                       memory_total_mib=24564.0, power_w=63.6, temperature_c=43.0),
             GpuSample(index=1, utilization_percent=0.0, memory_used_mib=17246.0,
                       memory_total_mib=24564.0, power_w=65.1, temperature_c=41.0)]
# a GTX 1080 of xml-gtx1080-x2-drv460.xml, at 100 %
BUSY_GPU = GpuSample(index=0, utilization_percent=100.0, memory_used_mib=2900.0,
                     memory_total_mib=8116.0, power_w=211.86, temperature_c=67.0)


@pytest.fixture
async def exchange(database_url: str, tmp_path: Path) -> AsyncIterator[Exchange]:
    async with open_exchange(tmp_path, database_url, metrics=CONFIG) as opened:
        yield opened


async def _running(live: Live, agent: FakeAgent) -> tuple[str, int]:
    job_id, attempt = await place_job(live.exchange, agent)
    await agent.event(job_id, attempt, "accepted")
    await agent.event(job_id, attempt, "started", pid=4242)
    return job_id, attempt


def _sample(job_id: str, attempt: int, at: float, cpu: float | None = 0.1,
            gpus: list[GpuSample] | None = None) -> JobSample:
    return JobSample(job_id=job_id, attempt=attempt, time=START + at, cpu_percent=cpu,
                     memory_bytes=50 << 20, processes=2, work_bytes=4096, gpus=gpus or [])


async def _samples(agent: FakeAgent, *samples: JobSample, node: Sample | None = None) -> None:
    await agent.send(Metrics(jobs=list(samples), node=node))


async def _metrics(exchange: Exchange, path: str, **params: Any) -> dict[str, Any]:
    response = await exchange.client.get(f"/api/v1/{path}/metrics", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _kinds(exchange: Exchange, job_id: str) -> list[tuple[str, str]]:
    return [(e["kind"], e["message"]) for e in await exchange.events(job_id)
            if e["kind"] in ("stalled", "active", "warning")]


async def test_the_welcome_offers_metrics_and_samples_are_served(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    node_id, credential = await live.exchange.enroll("n1")
    agent = FakeAgent(live.ws_url, node_id, credential, (await agent_factory(connect=False))
                      .capabilities)
    assert "metrics" in (await agent.connect())["accepts"]
    job_id, attempt = await _running(live, agent)
    node = Sample(time=START + 5, cpu_percent=180.0, memory_bytes=3 * GIB,
                  memory_total_bytes=8 * GIB, cache_bytes=GIB, gpus=[BUSY_GPU],
                  disks=[DiskSample(label="work dir and cache", used_bytes=40 * GIB,
                                    total_bytes=100 * GIB)])
    await _samples(agent, _sample(job_id, attempt, 0, cpu=95.0, gpus=[BUSY_GPU]),
                   _sample(job_id, attempt, 5, cpu=97.0, gpus=[BUSY_GPU]),
                   _sample("j-unknown", 1, 5), node=node)
    body = await _metrics(live.exchange, f"jobs/{job_id}")
    assert [(s["time"], s["cpu_percent"], s["attempt"], s["period_s"]) for s in body["samples"]
            ] == [(START, 95.0, 1, 0.0), (START + 5, 97.0, 1, 0.0)]
    assert body["samples"][0]["gpus"] == [BUSY_GPU.model_dump()] and body["stalled"] is None
    newest = await _metrics(live.exchange, f"jobs/{job_id}", limit=1, since=START)
    assert [s["time"] for s in newest["samples"]] == [START + 5]
    served = (await _metrics(live.exchange, f"nodes/{node_id}"))["samples"]
    assert [(s["cpu_percent"], s["cache_bytes"], s["disks"][0]["label"]) for s in served] == [
        (180.0, GIB, "work dir and cache")]
    await agent.close()


async def test_metrics_of_an_unknown_job_or_node_are_404(live: Live) -> None:
    for path in ("jobs/j-none", "nodes/n-none"):
        response = await live.exchange.client.get(f"/api/v1/{path}/metrics")
        assert response.status_code == 404, response.text
    response = await live.exchange.client.get("/api/v1/jobs/j-none/metrics",
                                              params={"limit": 0})
    assert response.status_code == 422


async def test_a_job_that_sleeps_is_flagged_then_cleared_when_it_computes(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await _running(live, agent)
    await _samples(agent, *(_sample(job_id, attempt, t) for t in (0, 10, 20)))
    assert (await live.exchange.job(job_id))["stalled"] is None  # not watched 30 s yet
    await _samples(agent, _sample(job_id, attempt, 30))
    stalled = (await live.exchange.job(job_id))["stalled"]
    assert stalled["kind"] == "no_progress" and stalled["since"] == START
    assert stalled["evidence"]["max_cpu_percent"] == 0.1
    assert (await _metrics(live.exchange, f"jobs/{job_id}"))["stalled"]["kind"] == "no_progress"
    await _samples(agent, _sample(job_id, attempt, 40))  # still stalled: flagged once
    await _samples(agent, _sample(job_id, attempt, 50, cpu=85.0))
    assert (await live.exchange.job(job_id))["stalled"] is None
    assert await _kinds(live.exchange, job_id) == [
        ("stalled", "stalled: it printed nothing and used at most 0.1 % CPU for 30 s"),
        ("active", "active again: it prints or computes")]
    await agent.close()


async def test_a_job_that_prints_is_not_flagged(live: Live,
                                               agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await _running(live, agent)
    for t in (0, 10, 20, 30, 40):
        chunk = agent.log_chunk(job_id, attempt, agent.next_seq(job_id, attempt), b"step\n")
        await agent.send(chunk.model_copy(update={"time": START + t}))
        await _samples(agent, _sample(job_id, attempt, t))
    assert (await live.exchange.job(job_id))["stalled"] is None
    assert await _kinds(live.exchange, job_id) == []
    await agent.close()


async def test_idle_gpus_flag_a_job_that_otherwise_looks_busy(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    busy, a1 = await _running(live, agent)
    idle, a2 = await _running(live, agent)
    for t in (0, 10, 20, 30):
        await _samples(agent, _sample(busy, a1, t, cpu=100.0, gpus=[BUSY_GPU]),
                       _sample(idle, a2, t, cpu=100.0, gpus=IDLE_GPUS))
    assert (await live.exchange.job(busy))["stalled"] is None
    stalled = (await live.exchange.job(idle))["stalled"]
    assert stalled["kind"] == "gpu_idle" and stalled["evidence"]["max_gpu_percent"] == 0.0
    await agent.close()


async def test_a_filling_disk_warns_the_node_s_running_jobs_once(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, _ = await _running(live, agent)

    def node(at: float, used_gib: int) -> Sample:
        return Sample(time=START + at, disks=[DiskSample(
            label="work dir", used_bytes=used_gib * GIB, total_bytes=100 * GIB)])

    for at, used in ((0, 90), (5, 96), (10, 97), (15, 50), (20, 99)):
        await _samples(agent, node=node(at, used))
    assert [k for k, _ in await _kinds(live.exchange, job_id)] == ["warning", "warning"]
    assert (await _kinds(live.exchange, job_id))[0][1] == (
        "the disk of the node's work dir is 96% full (4.0 GiB free of 100.0 GiB)")
    await agent.close()


async def test_old_samples_become_minute_means_then_go(
        live: Live, agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await _running(live, agent)
    base = START - 7200 - (START % 60)  # two hours ago, on a minute boundary
    await _samples(agent, _sample(job_id, attempt, base - START + 0, cpu=10.0, gpus=[BUSY_GPU]),
                   _sample(job_id, attempt, base - START + 30, cpu=30.0),
                   _sample(job_id, attempt, base - START + 65, cpu=50.0),
                   _sample(job_id, attempt, 0, cpu=70.0))
    keeper = MetricsKeeper(live.exchange.state.db, CONFIG)
    assert await keeper.run_once(START) == 3
    samples = (await _metrics(live.exchange, f"jobs/{job_id}"))["samples"]
    assert [(s["time"], s["period_s"], s["cpu_percent"]) for s in samples] == [
        (base, 60.0, 20.0), (base + 60, 60.0, 50.0), (START, 0.0, 70.0)]
    assert samples[0]["gpus"][0]["utilization_percent"] == 100.0
    assert samples[0]["memory_bytes"] == 50 << 20
    assert await keeper.run_once(START) == 0  # nothing more to roll up
    await keeper.run_once(START + 86400 - 3600)  # the first means outlived the retention
    samples = (await _metrics(live.exchange, f"jobs/{job_id}"))["samples"]
    assert [(s["time"], s["period_s"]) for s in samples] == [(START - START % 60, 60.0)]
    await agent.close()


def _value(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found, f"{name} not in\n{text}"
    return float(found.group(1))


async def test_prometheus_metrics(live: Live, agent_factory: Callable[..., Any]) -> None:
    agent: FakeAgent = await agent_factory()
    await _running(live, agent)
    await live.exchange.submit(compute={"cpus": 64})  # fits no node: stays pending
    response = await live.exchange.client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert "# TYPE bourse_placement_latency_seconds histogram" in text
    assert _value(text, 'bourse_jobs{state="RUNNING"}') == 1
    assert _value(text, 'bourse_jobs{state="PENDING"}') == 1
    assert _value(text, 'bourse_jobs{state="FAILED"}') == 0
    assert _value(text, "bourse_queue_depth") == 1
    assert _value(text, 'bourse_nodes{state="online"}') == 1
    assert _value(text, "bourse_agents_connected") == 1
    assert _value(text, "bourse_jobs_stalled") == 0
    assert _value(text, "bourse_placement_latency_seconds_count") == 1
    assert _value(text, 'bourse_placement_latency_seconds_bucket{le="+Inf"}') == 1
    assert _value(text, 'bourse_placement_latency_seconds_bucket{le="0.01"}') == 1  # same tick
    await agent.close()


async def test_prometheus_metrics_need_an_admin_token(exchange: Exchange) -> None:
    anonymous = await exchange.client.get("/metrics", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    user = await exchange.user_token()
    refused = await exchange.client.get("/metrics", headers={"Authorization": f"Bearer {user}"})
    assert refused.status_code == 403
