"""Services: the gateway's overhead, the time to roll a bad version back, false rollbacks.

A local exchange (coordinator and agent as processes) runs a service whose replicas are a
small stdlib HTTP server. Measured in the same run:

1. latency of ``GET /predict`` at a fixed open-loop rate (--rate), straight to the replica's
   127.0.0.1 port (the baseline) and through the gateway (``/svc/<project>/<name>/``; the
   local agent shares the coordinator's loopback, so the gateway reaches the replica over a
   pooled connection, not the agent's WebSocket), alternated --rounds times; p50/p99 of each,
   the difference and the ratio, the rate held, and the CPU the coordinator and agent (from
   /proc) and the load generator spent per request;
2. a bad version (20 % 500s) rolled out under that load with the default rules (steps 10, 50,
   100; minimum 100 requests): seconds from its first answer to the rollback;
3. --rollouts rollouts of a good version (same code, a new digest): how many were rolled back
   (0 expected) and how long each took to promote (pause 2 s).

    python benchmarks/serving.py [--rate 200] [--seconds 5] [--rounds 3] [--rollouts 20]
                                 [--overhead-only]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import time
from typing import Any

import httpx

from _exchange import local_exchange, percentile
from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec
from bourse.protocol.services import ServiceApply, ServicePolicy
from bourse.sdk.client import Client
from bourse.sdk.config import load_credentials

SERVER = """\
import json, os, random, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
FAIL = float(os.environ.get("FAIL_RATE", "0"))
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK
    def log_message(self, *a): pass
    def do_GET(self):
        bad = self.path != "/health" and random.random() < FAIL
        body = json.dumps({"version": os.environ["VERSION"]}).encode()
        self.send_response(500 if bad else 200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _free_port() -> int:
    """A port no other run holds: a fixed one let two runs on one machine (or one cut short,
    whose replicas lived on) answer each other's requests — a bad version "promoted" on a
    good server's answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


PORT = _free_port()


def version(n: int, pause_s: float = 60.0, **env: str) -> ServiceApply:
    return ServiceApply(name="bench", job=JobSpec(
        command=["sh", "-c", f'exec {sys.executable} -c "$SERVER" $PORT'],
        env={"VERSION": str(n), "SERVER": SERVER, **env}, compute=Compute(cpus=0.5),
        max_retries=0), policy=ServicePolicy(port=PORT, readiness_path="/health",
                                             pause_s=pause_s))


async def load(url: str, headers: dict[str, str], rate: float, seconds: float,
               seen: list[tuple[float, int, str, float]] | None = None) -> list[float]:
    """Open-loop GETs at ``rate`` for ``seconds``: each one's latency in ms."""
    latencies: list[float] = []
    async with httpx.AsyncClient(headers=headers, timeout=30,
                                 limits=httpx.Limits(max_connections=64)) as client:
        async def one() -> None:
            t0 = time.perf_counter()
            try:
                got = await client.get(url)
                status, who = got.status_code, str(got.json().get("version", "?"))
            except (httpx.HTTPError, ValueError):
                status, who = 0, "?"
            latencies.append((time.perf_counter() - t0) * 1000)
            if seen is not None:
                seen.append((time.time(), status, who, latencies[-1]))

        tasks = []
        start = time.perf_counter()
        for i in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(one()))
        await asyncio.gather(*tasks)
    return latencies


def wait(what: str, predicate: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def ready(client: Client, number: int) -> bool:
    return any(v.number == number and v.ready for v in client.service("bench").versions)


async def one_by_one(url: str, headers: dict[str, str], count: int) -> list[float]:
    """``count`` GETs one after another on one keep-alive connection: latencies in ms, free
    of queueing in the load generator (the CPU each request costs shows plainly)."""
    latencies = []
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        for _ in range(count):
            t0 = time.perf_counter()
            (await client.get(url)).raise_for_status()
            latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes have used so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / os.sysconf("SC_CLK_TCK")


def overhead(base: str, auth: dict[str, str], pids: list[int],
             args: argparse.Namespace) -> None:
    """Direct and gateway rounds alternated: latency percentiles, the rate held, and the CPU
    the coordinator, the agent and the load generator spent per request (``pids``: the
    coordinator's, then the agents')."""
    rows: dict[str, list[dict[str, float]]] = {"direct": [], "gateway": []}
    urls = {"direct": f"http://127.0.0.1:{PORT}/predict", "gateway": f"{base}predict"}
    for _ in range(args.rounds):
        for kind, url in urls.items():
            cpu0, agent0 = cpu_s(pids[:1]), cpu_s(pids[1:])
            own0, t0 = time.process_time(), time.perf_counter()
            headers = auth if kind == "gateway" else {}
            lat = asyncio.run(one_by_one(url, headers, args.sequential) if args.sequential
                              else load(url, headers, args.rate, args.seconds))
            wall, n = time.perf_counter() - t0, len(lat)
            rows[kind].append({"p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99),
                               "rps": n / wall, "cpu": (cpu_s(pids[:1]) - cpu0) * 1000 / n,
                               "agent": (cpu_s(pids[1:]) - agent0) * 1000 / n,
                               "own": (time.process_time() - own0) * 1000 / n})
    offered = (f"{args.sequential} sequential requests" if args.sequential
               else f"{args.rate:.0f} req/s offered")
    for kind, got in rows.items():
        print(f"{kind:8} {offered} (min/median/max of "
              f"{args.rounds} rounds): p50 {_mmm([r['p50'] for r in got])} ms, "
              f"p99 {_mmm([r['p99'] for r in got])} ms, held {_mmm([r['rps'] for r in got])} "
              f"req/s; CPU per request: coordinator {_mmm([r['cpu'] for r in got])} ms, "
              f"agent {_mmm([r['agent'] for r in got])} ms, "
              f"load generator {_mmm([r['own'] for r in got])} ms")
    med = {kind: {key: statistics.median(r[key] for r in got) for key in ("p50", "p99")}
           for kind, got in rows.items()}
    g, d = med["gateway"], med["direct"]
    print(f"gateway overhead (medians of rounds): p50 {g['p50'] - d['p50']:+.2f} ms, "
          f"p99 {g['p99'] - d['p99']:+.2f} ms; ratio gateway/direct: p50 "
          f"{g['p50'] / d['p50']:.2f}x, p99 {g['p99'] / d['p99']:.2f}x "
          f"(goal: +2 ms / +10 ms at 500 req/s)")


def _mmm(values: list[float]) -> str:
    return f"{min(values):.2f}/{statistics.median(values):.2f}/{max(values):.2f}"


def rollout(client: Client, base: str, auth: dict[str, str], body: ServiceApply,
            rate: float) -> tuple[str, float, float]:
    """Apply ``body`` under load until the rollout ends: (verdict, seconds from its first
    answer to the end, seconds from apply to the end)."""
    seen: list[tuple[float, int, str, float]] = []
    number = client.apply_service(body).canary
    applied = time.time()

    async def until_decided() -> str:
        task = asyncio.create_task(load(f"{base}predict", auth, rate, 600, seen))
        try:
            while True:
                await asyncio.sleep(0.2)
                view = await asyncio.to_thread(client.service, "bench")
                if view.canary is None:
                    return "promoted" if view.stable == number else "rolled back"
        finally:
            task.cancel()

    verdict = asyncio.run(until_decided())
    ended = time.time()
    mine = [s[0] for s in seen if s[2] == str(number)]
    return verdict, ended - (min(mine) if mine else applied), ended - applied


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=20)
    parser.add_argument("--sequential", type=int, default=0, metavar="N",
                        help="measure the overhead with N requests one after another instead "
                             "of the open-loop rate")
    parser.add_argument("--overhead-only", action="store_true",
                        help="measure the gateway's overhead only (no rollouts)")
    args = parser.parse_args()
    with local_exchange(agents=1, cpus=4) as (client, status, _root):
        auth = {"Authorization": f"Bearer {load_credentials().token}"}
        view = client.apply_service(version(1))
        base = f"{status.url}{view.url}"
        wait("the first replica", lambda: ready(client, 1))
        overhead(base, auth, [status.server_pid, *status.agent_pids], args)
        if args.overhead_only:
            return 0
        verdict, after_first, _ = rollout(client, base, auth, version(2, FAIL_RATE="0.2"),
                                          args.rate)
        print(f"bad version (20 % 500s), default rules: {verdict} {after_first:.1f} s after "
              f"its first answer (goal: 30 s)", flush=True)
        false, times = 0, []
        for n in range(args.rollouts):
            verdict, _, total = rollout(client, base, auth, version(3 + n, pause_s=2.0),
                                        args.rate)
            false += verdict != "promoted"
            times.append(total)
            print(f"  good version {n + 1}/{args.rollouts}: {verdict} in {total:.1f} s",
                  flush=True)
        if times:
            print(f"good versions: {false} of {args.rollouts} rolled back (0 expected); "
                  f"promoted in {_mmm(times)} s (min/median/max)")
    return 0 if false == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
