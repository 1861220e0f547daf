"""Log throughput: a job printing 200 MB; all of it must reach `bourse logs`.

Measures the time from the job's start (RUNNING) until the client has every byte (checked
line by line), the resulting MB/s, and the agent's peak memory (RSS, sampled every 50 ms).
Printed beside it, in the same run: how fast the job alone writes the same output to a file.
Target (issue 3): >= 20 MB/s, agent memory under 200 MB.

    python benchmarks/logs.py [--mb 200]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args()
    alone = baseline(args.mb)
    with local_exchange(agents=1) as (client, status, _root):
        rss = PeakRss(status.agent_pids[0])
        rss.start()
        job = client.submit(JobSpec(command=[sys.executable, "-c", printer(args.mb)]))
        received, lines = 0, 0
        t_first = None
        for item in client.follow(job.id):  # what `bourse logs -f` reads
            if not isinstance(item, LogChunkView):
                continue
            data = base64.b64decode(item.data)
            t_first = t_first or time.time()
            received += len(data)
            lines += data.count(b"\n")
        t_end = time.time()
        rss.stop.set()
        final = client.job(job.id)
        running = next(e.time for e in client.events(job.id) if e.state == "RUNNING")
    expected = args.mb * 1_000_000
    seconds = t_end - running
    print(f"job state {final.state}; received {received:,} of {expected:,} bytes, "
          f"{lines:,} lines")
    print(f"logs: {received / 1e6 / seconds:6.1f} MB/s  ({seconds:.1f} s from RUNNING to the "
          f"last byte at the client)")
    print(f"the job alone writing to a file: {alone:6.1f} MB/s")
    print(f"agent peak memory: {rss.peak / 2**20:.0f} MiB")
    ok = received == expected and final.state == "SUCCEEDED"
    met = ok and received / 1e6 / seconds >= 20 and rss.peak < 200 * 2**20
    print(f"target >= 20 MB/s and agent < 200 MB: {'met' if met else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
