"""Log limits and redaction with real jobs on a real coordinator and agent: a secret printed
in pieces — flushed apart, byte by byte, across a full chunk, as it is and encoded — never
reaches the stored logs; a job printing past its node's log rate limit has the excess
dropped, a marker line where it was, and an event on its timeline."""

from __future__ import annotations

import base64

import pytest
from harness import Exchange

from bourse.agent.tailer import HOLD_S
from bourse.protocol.agent import LOG_CHUNK_BYTES
from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
SECRET = "hunter2-but-longer/+="
PIECES = """
import base64, os, sys, time
value = os.environ["API_TOKEN"].encode()
def show(text, pieces, pause=0.6, before=b""):  # each piece flushed on its own
    sys.stdout.buffer.write(before)
    step = -(-len(text) // pieces)
    for start in range(0, len(text), step):
        sys.stdout.buffer.write(text[start:start + step])
        sys.stdout.flush()
        time.sleep(pause)
    sys.stdout.buffer.write(b"\\n")
show(value, 3)
show(base64.b64encode(value), 2)
show(value.hex().encode(), 2)
show(value, len(value), pause=0.01)  # byte by byte
show(value, 2, pause=HOLD, before=b"late: ")  # longer than the agent holds a possible start
sys.stdout.buffer.write(b"x" * (CHUNK - 7) + value + b"\\n")  # across a full chunk
sys.stdout.flush()
""".replace("CHUNK", str(LOG_CHUNK_BYTES)).replace("HOLD", str(HOLD_S + 1.5))


def test_a_secret_printed_in_pieces_never_reaches_the_stored_logs(exchange: Exchange) -> None:
    """The agent holds back what could start a secret for a while (so a live follower does not
    see it either), and the coordinator redacts across chunks what comes later than that."""
    client = exchange.client
    client.set_secret("API_TOKEN", SECRET)
    agent = exchange.agent("n1")
    job = client.submit(JobSpec(command=["python3", "-c", PIECES],
                                project_secrets=["API_TOKEN"]))
    final = exchange.wait_ended(job.id, 60)
    assert final.state == "SUCCEEDED", final
    chunks = [base64.b64decode(c.data) for c in client.iter_logs(job.id)]
    stored = b"".join(chunks)
    printed = agent.stdout(job.id, 1)
    assert SECRET.encode() in printed and printed.count(b"\n") == 6
    for form in (SECRET.encode(), base64.b64encode(SECRET.encode()),
                 SECRET.encode().hex().encode()):
        assert form not in stored
    assert stored.count(b"[redacted]") == 6, stored[:300]
    late = chunks.index(b"late: ")  # the agent held the first half back, then sent it alone;
    assert chunks[late + 1:late + 3] == [b"[redacted]", b""]  # rewritten with the second


def test_a_job_printing_past_the_log_rate_limit_has_the_excess_dropped(
        exchange: Exchange) -> None:
    exchange.agent("n1", args=["--log-rate", "1MB", "--log-burst", "2MB"])
    script = ("import sys, time\nsys.stdout.write('first\\n'); sys.stdout.flush()\n"
              "time.sleep(0.5)\nsys.stdout.write(('y' * 99 + '\\n') * 100_000)\n"  # 10 MB
              "sys.stdout.flush(); time.sleep(1.5); print('last')\n")
    job = exchange.client.submit(JobSpec(command=["python3", "-c", script]))
    final = exchange.wait_ended(job.id, 60)
    assert final.state == "SUCCEEDED", final
    stored = b"".join(base64.b64decode(c.data) for c in exchange.client.iter_logs(job.id))
    assert stored.startswith(b"first\n") and stored.endswith(b"last\n")
    assert len(stored) < 4_000_000
    assert b"bytes dropped, log rate limit 1 MiB/s exceeded\n" in stored
    events = [e.message for e in exchange.client.events(job.id)]
    assert any("log rate limit 1 MiB/s exceeded" in m for m in events), events
