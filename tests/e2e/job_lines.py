"""The job the fault tests run, and the check of what the exchange kept of its output.

The job prints ``line 0``, ``line 1``, ... with a flush and a short pause after each, so that
the stored log shows at once whether every line arrived exactly once and in order. Its first
attempt can be made longer and to fail, so a test can tell which attempt's result the job took.
"""

from __future__ import annotations

import base64
import sys
from collections import defaultdict

from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec
from bourse.sdk.client import Client

SCRIPT = """\
import os, sys, time
lines, pause, first_lines, first_exit = sys.argv[1:]
first = os.environ.get("BOURSE_ATTEMPT") == "1"
for i in range(int(first_lines if first else lines)):
    print(f"line {i}", flush=True)
    time.sleep(float(pause))
sys.exit(int(first_exit) if first else 0)
"""


def lines_job(lines: int, pause: float = 0.1, *, first_lines: int | None = None,
              first_exit: int = 0, max_retries: int = 3, name: str | None = None) -> JobSpec:
    """``lines`` numbered lines, ``pause`` seconds apart; attempt 1 prints ``first_lines``
    instead and exits with ``first_exit``."""
    argv = [str(lines), str(pause), str(lines if first_lines is None else first_lines),
            str(first_exit)]
    return JobSpec(command=[sys.executable, "-c", SCRIPT, *argv], compute=Compute(cpus=0.5),
                   max_retries=max_retries, name=name)


def expected(lines: int) -> list[str]:
    return [f"line {i}" for i in range(lines)]


def outputs(client: Client, job_id: str) -> dict[tuple[int, str], bytes]:
    """Each (attempt, stream)'s stored bytes, asserting the chunks tile the stream exactly: every
    chunk starts where the one before it (by seq) ended, and no seq is stored twice."""
    chunks = defaultdict(list)
    for chunk in client.iter_logs(job_id):
        chunks[(chunk.attempt, chunk.stream)].append(chunk)
    streams = {}
    for key, found in chunks.items():
        found.sort(key=lambda c: c.seq)
        seqs = [c.seq for c in found]
        assert len(set(seqs)) == len(seqs), f"{job_id} {key}: a seq stored twice: {seqs}"
        data = bytearray()
        for c in found:
            assert c.offset == len(data), (
                f"{job_id} {key}: chunk seq {c.seq} starts at byte {c.offset} but the stream "
                f"so far has {len(data)} bytes ({'a gap' if c.offset > len(data) else 'overlap'})")
            data += base64.b64decode(c.data)
        streams[key] = bytes(data)
    return streams


def printed(client: Client, job_id: str, attempt: int) -> list[str]:
    """The lines the exchange stored for one attempt's stdout (checked as in ``outputs``)."""
    return outputs(client, job_id).get((attempt, "stdout"), b"").decode().splitlines()


def stored_lines(client: Client, job_id: str) -> int:
    """How many lines of the job the exchange has so far (any attempt)."""
    page = client.logs(job_id, 0, 10000)
    return sum(base64.b64decode(c.data).count(b"\n") for c in page.chunks)
