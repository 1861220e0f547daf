"""A job's port through a real exchange when another process holds it (issue 20): a job whose
port is taken on its node never starts there (its attempt is LOST, saying who holds it), and
a request to a port the job has not bound while another process listens there is refused,
never answered by that process."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest
from ui_exchange import UiExchange, _free_port

from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec, Port

pytestmark = pytest.mark.slow


class Foreign:
    """A server of this test process (not any job's) on 127.0.0.1, answering 'foreign'."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_server(("127.0.0.1", port))
        self.answered = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.answered += 1
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nforeign")
            conn.close()


@pytest.fixture(scope="module")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiExchange]:
    made = UiExchange(tmp_path_factory.mktemp("owner")).start()
    try:
        yield made
    finally:
        made.close()


def _spec(port: int, script: str) -> JobSpec:
    return JobSpec(command=[sys.executable, "-c", script], name="owner", max_retries=0,
                   compute=Compute(cpus=0.25), ports=[Port(number=port)])


def test_a_job_whose_port_is_taken_does_not_start_there(exchange: UiExchange) -> None:
    foreign = Foreign(_free_port())
    port = foreign.sock.getsockname()[1]
    try:
        job = exchange.client.submit(_spec(port, "open('ran', 'w')"))
        done = exchange.wait_state(job.id, "FAILED", timeout=60)
    finally:
        foreign.sock.close()
    assert done.reason is not None and f"port {port} is already in use" in done.reason
    assert "lost" in done.reason  # the node's problem, not the job's failure


def test_a_request_never_reaches_a_process_that_is_not_the_job(exchange: UiExchange) -> None:
    port = _free_port()
    job = exchange.client.submit(_spec(port, "import time; time.sleep(60)"))
    exchange.wait_state(job.id, "RUNNING", timeout=60)
    foreign = Foreign(port)  # took the port after the job started, which never bound it
    try:
        got = httpx.get(f"{exchange.url}/jobs/{job.id}/ports/{port}/",
                        headers={"Authorization": f"Bearer {exchange.token}"}, timeout=30)
    finally:
        foreign.sock.close()
        exchange.client.cancel(job.id)
    assert got.status_code == 502
    assert "not by the job" in got.text and f"port {port}" in got.text
    assert foreign.answered == 0
