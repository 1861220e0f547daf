"""Agents: how many connected agents one coordinator holds (issue 24).

N simulated agents (``bourse.agent.sim``: the real protocol over the real WebSocket, no
processes; nodes with no free CPU, so nothing is placed on them) against a real coordinator
subprocess with the shortest loss window there is (three keep-alives). After all are
connected and one keep-alive has passed, a window of ``--window`` keep-alives is measured:
heartbeat acknowledgement p50/p99/max (sent to acknowledged, as the agent sees it), the share
of heartbeats acknowledged, the coordinator's CPU per agent per keep-alive (beyond what it
spends with no agent, measured first in the same exchange), its RSS per agent,
nodes declared lost (must be 0) and connections the coordinator closed; and the time to
connect N (must grow as N: the per-agent figure stays flat).

``--baseline DIR`` runs the same sizes, alternated, against a coordinator from another source
tree (``DIR/src``: e.g. ``git archive`` of the commit before a change), in the same run; the
ratios printed are this tree's over the baseline's. The simulated agents run in this process
(their CPU is printed too: on a small machine they share it with the coordinator).

    python benchmarks/agents.py [--agents 100,500,1000,2000] [--keep-alive 5]
                                [--window 3] [--baseline /tmp/base] [--runs 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from _exchange import local_exchange, percentile
from _fleet import Fleet, no_room
from bourse.sdk.config import load_credentials


@dataclass
class Result:
    tree: str
    agents: int
    welcomed: int
    connect_s: float
    connect_cpu_ms: float  # coordinator CPU per agent connected
    enrol_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    acked: float  # share of the window's heartbeats acknowledged
    cpu_ms: float  # coordinator CPU per agent per keep-alive, beyond its CPU with no agent
    rss_kib: float  # coordinator RSS per agent
    lost: int
    closed: int
    sim_cpu_ms: float  # the simulated agents' CPU per agent per keep-alive

    def line(self) -> str:
        per = self.connect_s / max(1, self.welcomed) * 1000
        return (f"{self.tree:8s} {self.agents:5d} agents: connected {self.welcomed:5d} in "
                f"{self.connect_s:6.1f} s ({per:5.1f} ms/agent, coordinator CPU "
                f"{self.connect_cpu_ms:4.1f} ms/agent); ack p50 {self.p50_ms:7.1f} "
                f"p99 {self.p99_ms:7.1f} max {self.max_ms:7.1f} ms, {self.acked:6.1%} acked; "
                f"CPU {self.cpu_ms:5.2f} ms/agent/keep-alive (sims {self.sim_cpu_ms:5.2f}); "
                f"RSS {self.rss_kib:6.1f} KiB/agent; lost {self.lost}, closed {self.closed}")


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def measure(tree: str, source: Path | None, agents: int, keep_alive: float,
            window: float) -> Result:
    previous = os.environ.get("PYTHONPATH")
    if source is not None:  # the coordinator subprocess imports the baseline's bourse
        os.environ["PYTHONPATH"] = str(source / "src")
    try:
        with local_exchange(agents=0, keep_alive_s=keep_alive,
                            loss_window_s=max(1.0, 3 * keep_alive)) as (_, status, _root):
            if source is not None:
                restore(previous)
            return _measure(tree, status.server_pid, agents, keep_alive, window)
    finally:
        restore(previous)


def restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = previous


def _measure(tree: str, pid: int, agents: int, keep_alive: float, window: float) -> Result:
    creds, server, me = load_credentials(), psutil.Process(pid), psutil.Process()
    rss0, idle0 = server.memory_info().rss, cpu_s(server)
    time.sleep(keep_alive)  # what the coordinator spends with no agent at all
    idle = cpu_s(server) - idle0
    fleet = Fleet(creds.url, creds.token, agents, caps=no_room(), keep_alive_s=keep_alive)
    try:
        enrolled = fleet.enrol()
        before = cpu_s(server)
        connected = fleet.start(timeout_s=max(120.0, agents * 0.1))
        connect_cpu = cpu_s(server) - before
        time.sleep(keep_alive)  # every agent has heartbeated once
        fleet.mark()
        cpu0, mine0 = cpu_s(server), cpu_s(me)
        time.sleep(window * keep_alive)
        cpu1, mine1 = cpu_s(server), cpu_s(me)
        acks, sent = fleet.window()
        rss1 = server.memory_info().rss
        lost = lost_nodes(creds.url, creds.token)
        closed = fleet.closed()
        for (code, reason), count in fleet.close_reasons().items():
            print(f"    {count} connections closed: {code} {reason!r}", flush=True)
    finally:
        fleet.stop()
    beats = max(1, connected.welcomed) * window
    ms = sorted(a * 1000 for a in acks) or [float("nan")]
    return Result(tree, agents, connected.welcomed, connected.connect_s,
                  connect_cpu / max(1, connected.welcomed) * 1000, enrolled,
                  percentile(ms, 0.5), percentile(ms, 0.99), ms[-1], len(acks) / max(1, sent),
                  (cpu1 - cpu0 - idle * window) / beats * 1000,
                  (rss1 - rss0) / max(1, agents) / 1024, lost, closed,
                  (mine1 - mine0) / beats * 1000)


def lost_nodes(url: str, token: str) -> int:
    response = httpx.get(f"{url}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"},
                         timeout=120)
    response.raise_for_status()
    body = response.json()
    nodes = body["nodes"] if isinstance(body, dict) else body
    return sum(1 for n in nodes if n["state"] == "lost")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default="100,500,1000,2000")
    parser.add_argument("--keep-alive", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=3.0, help="keep-alives measured")
    parser.add_argument("--baseline", type=Path, help="a source tree to compare with")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    trees: list[tuple[str, Path | None]] = [("this", None)]
    if args.baseline is not None:
        trees.append(("baseline", args.baseline))
    results: list[Result] = []
    for size in (int(n) for n in args.agents.split(",")):
        for run in range(args.runs):
            for tree, source in trees if run % 2 == 0 else trees[::-1]:
                result = measure(tree, source, size, args.keep_alive, args.window)
                print(result.line(), flush=True)
                results.append(result)
    summary(results, args.keep_alive)
    return 0 if all(r.lost == 0 and r.closed == 0 for r in results if r.tree == "this") else 1


def summary(results: list[Result], keep_alive: float) -> None:
    print(f"keep-alive {keep_alive:g} s; medians over runs; ratio = this / baseline")
    for size in sorted({r.agents for r in results}):
        mine = [r for r in results if r.agents == size and r.tree == "this"]
        base = [r for r in results if r.agents == size and r.tree == "baseline"]
        p99 = statistics.median(r.p99_ms for r in mine)
        cpu = statistics.median(r.cpu_ms for r in mine)
        line = f"{size:5d} agents: ack p99 {p99:7.1f} ms, CPU {cpu:5.2f} ms/agent/keep-alive"
        if base:
            b99 = statistics.median(r.p99_ms for r in base)
            bcpu = statistics.median(r.cpu_ms for r in base)
            line += (f"; baseline p99 {b99:7.1f} ms, CPU {bcpu:5.2f}: ratios p99 "
                     f"x{p99 / b99:.2f}, CPU x{cpu / bcpu:.2f}")
        print(line)


if __name__ == "__main__":
    sys.exit(main())
