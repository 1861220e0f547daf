"""A Python job's output on a real coordinator and agent: a script that prints with plain
``print()`` has its lines stored while it runs, and what it printed before ``bourse stop``
is kept (it was lost with Python's buffer: the job's stdout file stayed empty)."""

from __future__ import annotations

import base64

import pytest
from harness import Exchange

from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
SCRIPT = """\
import os, time
print("loading data")
while not os.path.exists("go"):
    time.sleep(0.01)
print("epoch 1 done")
open("printed", "w").close()
time.sleep(600)
"""


def stored(exchange: Exchange, job_id: str) -> bytes:
    """The job's stdout as the coordinator stores it."""
    return b"".join(base64.b64decode(c.data) for c in exchange.client.iter_logs(job_id)
                    if c.stream == "stdout")


def test_a_python_job_s_lines_are_stored_as_printed_and_kept_after_a_stop(
        exchange: Exchange) -> None:
    agent = exchange.agent("n1")
    job = exchange.client.submit(JobSpec(command=["python3", "-c", SCRIPT]))
    exchange.wait_running(job.id)
    exchange.wait_for(lambda: stored(exchange, job.id) == b"loading data\n", 30,
                      "the first line to be stored while the job waits")
    work = agent.attempt_dir(job.id, 1) / "work"
    (work / "go").touch()
    exchange.wait_for((work / "printed").exists, 30, "the second line")
    exchange.client.cancel(job.id)
    final = exchange.wait_ended(job.id, 60)
    assert final.state == "CANCELLED", final
    assert stored(exchange, job.id) == b"loading data\nepoch 1 done\n"
