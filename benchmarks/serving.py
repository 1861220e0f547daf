"""Services: the gateway's overhead, the time to roll a bad version back, false rollbacks.

A local exchange (coordinator and agent as processes) runs a service whose replicas are a
small stdlib HTTP server. Measured in the same run:

1. latency of ``GET /predict`` at a fixed open-loop rate (--rate), straight to the replica's
   127.0.0.1 port (the baseline) and through the gateway (``/svc/<project>/<name>/``, over
   the agent's WebSocket), alternated --rounds times; p50/p99 of each and the difference;
2. a bad version (20 % 500s) rolled out under that load with the default rules (steps 10, 50,
   100; minimum 100 requests): seconds from its first answer to the rollback;
3. --rollouts rollouts of a good version (same code, a new digest): how many were rolled back
   (0 expected) and how long each took to promote (pause 2 s).

    python benchmarks/serving.py [--rate 200] [--seconds 5] [--rounds 3] [--rollouts 20]
"""

from __future__ import annotations

import argparse
import asyncio
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
PORT = 18700


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


def overhead(client: Client, base: str, auth: dict[str, str], args: argparse.Namespace) -> None:
    figures: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
    urls = {"direct": f"http://127.0.0.1:{PORT}/predict", "gateway": f"{base}predict"}
    for _ in range(args.rounds):
        for kind, url in urls.items():
            lat = asyncio.run(load(url, auth if kind == "gateway" else {}, args.rate,
                                   args.seconds))
            figures[kind].append((percentile(lat, 0.5), percentile(lat, 0.99)))
    for kind, rows in figures.items():
        p50s, p99s = [r[0] for r in rows], [r[1] for r in rows]
        print(f"{kind:8} at {args.rate:.0f} req/s: p50 {_mmm(p50s)} ms, p99 {_mmm(p99s)} ms")
    d50 = statistics.median(r[0] for r in figures["gateway"]) - statistics.median(
        r[0] for r in figures["direct"])
    d99 = statistics.median(r[1] for r in figures["gateway"]) - statistics.median(
        r[1] for r in figures["direct"])
    print(f"gateway overhead (medians of rounds): p50 +{d50:.2f} ms, p99 +{d99:.2f} ms")


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
    args = parser.parse_args()
    with local_exchange(agents=1, cpus=4) as (client, status, _root):
        auth = {"Authorization": f"Bearer {load_credentials().token}"}
        view = client.apply_service(version(1))
        base = f"{status.url}{view.url}"
        wait("the first replica", lambda: ready(client, 1))
        overhead(client, base, auth, args)
        verdict, after_first, _ = rollout(client, base, auth, version(2, FAIL_RATE="0.2"),
                                          args.rate)
        print(f"bad version (20 % 500s), default rules: {verdict} {after_first:.1f} s after "
              f"its first answer (goal: 30 s)")
        false, times = 0, []
        for n in range(args.rollouts):
            verdict, _, total = rollout(client, base, auth, version(3 + n, pause_s=2.0),
                                        args.rate)
            false += verdict != "promoted"
            times.append(total)
        if times:
            print(f"good versions: {false} of {args.rollouts} rolled back (0 expected); "
                  f"promoted in {_mmm(times)} s (min/median/max)")
    return 0 if false == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
