"""A job's port through the exchange: download throughput and the coordinator's memory.

A job serves a file of --mb megabytes with `python -m http.server` on a declared port. Measured
in the same run: the download straight from 127.0.0.1:<port> (the baseline: what the proxy
cannot beat), the same download through the coordinator (`/jobs/{id}/ports/{port}/`, over the
agent's WebSocket), and the coordinator's and the agent's memory growth while a client that
stopped reading holds such a download open for 5 s (flow control should keep it near the
256 KiB window, not the file's size).

    python benchmarks/ports.py [--mb 100]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

import httpx
import psutil

from _exchange import local_exchange
from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec, Port
from bourse.sdk.client import Client
from bourse.sdk.config import load_credentials

SERVER = ("import http.server, sys\n"
          "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])),"
          " http.server.SimpleHTTPRequestHandler).serve_forever()\n")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def download(url: str, headers: dict[str, str]) -> tuple[int, float]:
    t0 = time.perf_counter()
    size = 0
    with httpx.stream("GET", url, headers=headers, timeout=120) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes(1 << 20):
            size += len(chunk)
    return size, time.perf_counter() - t0


def wait_served(url: str, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, headers=headers, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def stalled_growth(url: str, headers: dict[str, str], pids: list[int]) -> list[int]:
    """RSS growth of ``pids`` while a client reads 1 MiB of a download and then stops."""
    procs = [psutil.Process(p) for p in pids]
    before = [p.memory_info().rss for p in procs]
    with httpx.stream("GET", url, headers=headers, timeout=120) as response:
        next(response.iter_raw(1 << 20))
        peak = list(before)
        for _ in range(50):
            time.sleep(0.1)
            peak = [max(a, p.memory_info().rss) for a, p in zip(peak, procs, strict=True)]
    return [a - b for a, b in zip(peak, before, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    with local_exchange(agents=1) as (client, status, root):
        port = free_port()
        job = client.submit(JobSpec(command=[sys.executable, "-c", SERVER, str(port)],
                                    compute=Compute(cpus=0.5), ports=[Port(number=port)],
                                    max_retries=0))
        _wait_running(client, job.id)
        work = next(root.glob(f"local/**/jobs/{job.id}/1/work"))
        (work / "blob.bin").write_bytes(os.urandom(args.mb * 1_000_000))
        auth = {"Authorization": f"Bearer {load_credentials().token}"}
        proxied = f"{status.url}/jobs/{job.id}/ports/{port}/blob.bin"
        direct = f"http://127.0.0.1:{port}/blob.bin"
        wait_served(f"{status.url}/jobs/{job.id}/ports/{port}/", auth)
        size_d, secs_d = download(direct, {})
        size_p, secs_p = download(proxied, auth)
        growth = stalled_growth(proxied, auth, [status.server_pid, status.agent_pids[0]])
        client.cancel(job.id)
    expected = args.mb * 1_000_000
    print(f"direct from 127.0.0.1:{port}: {size_d / 1e6 / secs_d:7.1f} MB/s  (baseline)")
    print(f"through the coordinator:     {size_p / 1e6 / secs_p:7.1f} MB/s  "
          f"({size_p / 1e6 / secs_p / (size_d / 1e6 / secs_d):.0%} of direct)")
    print(f"a stalled client holding a {args.mb} MB download for 5 s: coordinator "
          f"+{growth[0] / 2**20:.1f} MiB, agent +{growth[1] / 2**20:.1f} MiB")
    return 0 if size_d == size_p == expected else 1


def _wait_running(client: Client, job_id: str) -> None:
    deadline = time.monotonic() + 60
    while client.job(job_id).state != "RUNNING":
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} did not start")
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
