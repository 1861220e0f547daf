"""Log throughput: a job printing 200 MB; all of it must reach `bourse logs`.

Measures the time from the job's start (RUNNING) until the client has every byte (checked
line by line), the resulting MB/s, and the agent's peak memory (RSS, sampled every 50 ms).
Printed beside it, in the same run: how fast the job alone writes the same output to a file.
Target (issue 3): >= 20 MB/s, agent memory under 200 MB. ``--secret`` then runs the same job
again naming a project secret, so each chunk is redacted with its stream's stored tail
(docs/security.md), and prints both rates.

    python benchmarks/logs.py [--mb 200] [--secret]
"""

from __future__ import annotations

import argparse
import base64
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from _exchange import local_exchange
from bourse.protocol.api import LogChunkView
from bourse.protocol.common import JobSpec
from bourse.sdk.client import Client

LINE = "x" * 99  # 100 bytes with the newline
PRINTER = ("import sys\nline = ('{line}' + chr(10)).encode()\nout = sys.stdout.buffer\n"
           "for i in range({count}):\n    out.write(line)\n")


def printer(mb: int) -> str:
    return PRINTER.format(line=LINE, count=mb * 10_000)


def baseline(mb: int) -> float:
    with tempfile.TemporaryFile() as sink:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", printer(mb)], stdout=sink, check=True)
        return mb / (time.perf_counter() - t0)


class PeakRss(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.05)


def follow(client: Client, spec: JobSpec) -> tuple[str, int, int, float]:
    """Submit, read the log as `bourse logs -f` does: (final state, bytes, lines, seconds
    from RUNNING to the last byte)."""
    job = client.submit(spec)
    received = lines = 0
    for item in client.follow(job.id):
        if not isinstance(item, LogChunkView):
            continue
        data = base64.b64decode(item.data)
        received += len(data)
        lines += data.count(b"\n")
    t_end = time.time()
    running = next(e.time for e in client.events(job.id) if e.state == "RUNNING")
    return client.job(job.id).state, received, lines, t_end - running


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--secret", action="store_true",
                        help="also run the job naming a secret (redaction across chunks)")
    args = parser.parse_args()
    alone = baseline(args.mb)
    with local_exchange(agents=1) as (client, status, _root):
        rss = PeakRss(status.agent_pids[0])
        rss.start()
        spec = JobSpec(command=[sys.executable, "-c", printer(args.mb)])
        state, received, lines, seconds = follow(client, spec)
        rss.stop.set()
        if args.secret:
            client.set_secret("BENCH_SECRET", "not-printed-by-the-job-0123456789")
            redacted = follow(client, spec.model_copy(update={"project_secrets": [
                "BENCH_SECRET"]}))
    expected = args.mb * 1_000_000
    if args.secret:
        print(f"with a secret to redact: {redacted[1] / 1e6 / redacted[3]:6.1f} MB/s, without: "
              f"{received / 1e6 / seconds:6.1f} MB/s (job {redacted[0]}, "
              f"{redacted[1]:,} bytes)")
    print(f"job state {state}; received {received:,} of {expected:,} bytes, "
          f"{lines:,} lines")
    print(f"logs: {received / 1e6 / seconds:6.1f} MB/s  ({seconds:.1f} s from RUNNING to the "
          f"last byte at the client)")
    print(f"the job alone writing to a file: {alone:6.1f} MB/s")
    print(f"agent peak memory: {rss.peak / 2**20:.0f} MiB")
    ok = received == expected and state == "SUCCEEDED"
    met = ok and received / 1e6 / seconds >= 20 and rss.peak < 200 * 2**20
    print(f"target >= 20 MB/s and agent < 200 MB: {'met' if met else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
