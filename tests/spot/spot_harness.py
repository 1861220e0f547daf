"""A coordinator with its embedded store and interruptible agents, for the spot proofs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from dataplane_harness import KEEP_ALIVE_S
from harness import Agent, Exchange

from bourse.protocol.api import JobDetail, JobView
from bourse.protocol.common import JobSpec

HERE = Path(__file__).resolve().parent


def spot_agent(exchange: Exchange, name: str, region: str, *, spot_price: float = 0.04,
               cpus: int = 2, keep_alive: float = KEEP_ALIVE_S,
               args: Sequence[str] = ()) -> Agent:
    agent = Agent(exchange.cluster, name, exchange.coordinator.url, keep_alive, cpus=cpus)
    agent.proc.args += ["--interruptible", "--spot-price", str(spot_price),
                        "--region", region, "--provider", "acme", *args]
    agent.start(exchange.client.create_enrollment(name=name).token)
    exchange.wait_connected(agent)
    return agent


def renew(exchange: Exchange, agent: Agent) -> None:
    """A reclaimed node's capacity comes back: its agent restarts and says hello again."""
    agent.kill9()
    agent.start()
    exchange.wait_for(lambda: node_state(exchange, agent) == "online", 60,
                      f"{agent.name} back online")


def node_state(exchange: Exchange, agent: Agent) -> str | None:
    return next((n.state for n in exchange.client.nodes() if n.id == agent.node_id), None)


def submit(exchange: Exchange, script: str, *args: str) -> JobView:
    spec = JobSpec(command=[sys.executable, str(HERE / script), *args],
                   compute={"cpus": 1, "spot": "only"})
    return exchange.client.submit(spec)


def running_on(exchange: Exchange, job_id: str, agent: Agent, attempt: int) -> JobDetail:
    return exchange.wait_job(
        job_id, lambda j: j.state == "RUNNING" and j.attempt == attempt
        and j.node_id == agent.node_id, 60, f"to run attempt {attempt} on {agent.name}")


def stdout_has(agent: Agent, job_id: str, attempt: int, text: str) -> bool:
    return text.encode() in agent.stdout(job_id, attempt)


def result_line(agent: Agent, job_id: str, attempt: int, prefix: str) -> str:
    for line in agent.stdout(job_id, attempt).decode().splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    raise AssertionError(f"no {prefix!r} line in attempt {attempt}'s output:\n"
                         f"{agent.stdout(job_id, attempt).decode()}")
