"""A two-version rollout through a real exchange (coordinator and agent as processes, replicas
as jobs), under bounded load on loopback: a good version promoted to 100 %, a bad one (20 %
500s) rolled back by the gateway's own figures, a replica killed with SIGKILL taken out of the
rotation and replaced — and no request failing because of any of it. The agent runs on the
coordinator's machine, so the gateway reaches the replicas directly (``serving.direct``);
version 1 comes from a task file (`bourse serve`), 2 from the app API's ``Service``, 3 from
the SDK's ``ServiceApply``."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from ui_exchange import UiExchange, wait_for

from bourse.app import Rollout, Service
from bourse.cli.main import cli
from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec
from bourse.protocol.services import ServiceApply, ServicePolicy
from bourse.sdk.client import Client

pytestmark = pytest.mark.slow
SERVER = (Path(__file__).parent / "replica_server.py").read_text()
RATE = 30  # requests/s offered: bounded, so the 2-core machine stays the judge's, not the load's


def version(n: int, **env: str) -> ServiceApply:
    return ServiceApply(
        name="digits",
        job=JobSpec(command=["sh", "-c", f'exec {sys.executable} -c "$SERVER" $PORT'],
                    env={"VERSION": str(n), "SERVER": SERVER, **env},
                    compute=Compute(cpus=0.25), max_retries=0),
        policy=ServicePolicy(port=18500, readiness_path="/health", min_replicas=2,
                             max_replicas=2, steps=[10, 50, 100], pause_s=2.0,
                             min_requests=25))


def service(n: int) -> Service:
    """A version as the app API writes it (``Service``): the fields of ``version``'s."""
    return Service("digits", ["sh", "-c", f'exec {sys.executable} -c "$SERVER" $PORT'],
                   port=18500, compute=Compute(cpus=0.25), max_retries=0,
                   env={"VERSION": str(n), "SERVER": SERVER}, readiness="/health",
                   replicas=2, rollout=Rollout(steps=[10, 50, 100], pause="2s",
                                               min_requests=25))


@dataclass
class Load:
    """GETs at a fixed rate from a thread; what each answer said (version, status, pid)."""

    url: str
    token: str
    seen: list[tuple[float, str, int, int]] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self, workers: int = 4) -> None:
        """``workers`` threads, each at its share of RATE (a slow answer delays only its
        own thread's next request)."""
        threads = [threading.Thread(target=self._worker, args=(workers,), daemon=True)
                   for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _worker(self, workers: int) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {self.token}"},
                          timeout=10) as client:
            next_at = time.monotonic()
            while not self._stop.is_set():
                self._one(client)
                next_at += workers / RATE
                time.sleep(max(0.0, next_at - time.monotonic()))

    def _one(self, client: httpx.Client) -> None:
        try:
            got = client.get(self.url)
            body = got.json()
            self.seen.append((time.time(), str(body.get("version", "?")), got.status_code,
                              int(body.get("pid", 0))))
        except (httpx.HTTPError, ValueError) as exc:
            self.failures.append((time.time(), repr(exc)))

    def gateway_errors(self, bad: str = "") -> list[tuple[float, str, int, int]]:
        """Failed answers that are not a version's own injected errors."""
        return [s for s in self.seen if s[2] >= 400 and s[1] != bad]

    def stop(self) -> None:
        self._stop.set()


@pytest.fixture(scope="module")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiExchange]:
    found = UiExchange(tmp_path_factory.mktemp("serving")).start()
    try:
        yield found
    finally:
        found.close()


def _ready(client: Client, number: int, count: int) -> bool:
    versions = {v.number: v for v in client.service("digits").versions}
    return number in versions and versions[number].ready >= count


def _story(client: Client) -> str:
    """What the service did, for a failed wait."""
    detail = client.service("digits")
    lines = [f"v{v.number} {v.state} {v.weight}% ready {v.ready}/{v.replicas} {v.figures}"
             for v in detail.versions]
    lines += [f"{e.time:.1f} {e.kind} v{e.version}: {e.message}" for e in detail.events]
    return "\n".join(lines)


def _decided(client: Client, words: str) -> str | None:
    return next((e.message for e in client.service("digits").events
                 if e.kind == "decision" and words in e.message), None)


def bourse(exchange: UiExchange, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={
        "BOURSE_URL": exchange.url, "BOURSE_TOKEN": exchange.token,
        "BOURSE_HOME": str(exchange.root / "cli-home"), "BOURSE_CONTEXT": None})
    return result.exit_code, result.output


TASK = """\
name: digits
env: {VERSION: "1"}
resources: {cpus: 0.25}
run: exec %s %s $PORT
service:
  port: 18500
  readiness: /health
  replicas: 2
  rollout: {steps: [10, 50, 100], pause: 2s, min_requests: 25}
"""


def _start(exchange: UiExchange, tmp_path: Path) -> str:
    """Version 1 from a task file with `bourse serve`; its URL once both replicas are ready."""
    task = tmp_path / "service.yaml"
    task.write_text(TASK % (sys.executable, Path(__file__).parent / "replica_server.py"))
    code, out = bourse(exchange, "serve", str(task), "--no-code")
    assert code == 0, out
    assert f"{exchange.url}/svc/default/digits/" in out
    wait_for(lambda: _ready(exchange.client, 1, 2), 60, "version 1's two replicas",
             exchange.logs)
    return f"{exchange.url}{exchange.client.service('digits').url}"


def _promote(client: Client, load: Load) -> None:
    assert service(2).apply(client, code=False).canary == 2  # through the app API
    wait_for(lambda: client.service("digits").stable == 2, 60, "version 2 promoted",
             lambda: _story(client))
    assert _decided(client, "promoted")
    promoted = time.time()
    time.sleep(1.5)
    assert {s[1] for s in load.seen if s[0] > promoted + 0.5} == {"2"}  # all on the new one


def _roll_back(client: Client, load: Load) -> None:
    bad_at = time.time()
    client.apply_service(version(3, FAIL_RATE="0.2"))
    wait_for(lambda: _decided(client, "rolled back version 3"), 60, "the rollback",
             lambda: _story(client))
    rolled = time.time()
    first_bad = min(s[0] for s in load.seen if s[1] == "3")
    detail = client.service("digits")
    assert detail.stable == 2 and detail.canary is None
    assert "error rate" in (_decided(client, "rolled back version 3") or "")
    for event in detail.events:
        if event.kind in ("decision", "rollout"):
            print(f"{event.time - bad_at:+7.1f} s  {event.message}")
    print(f"bad version: first traffic {first_bad - bad_at:.1f} s after apply, rolled "
          f"back {rolled - first_bad:.1f} s after its first request")
    assert rolled - first_bad < 30


def _kill_a_replica(client: Client, load: Load) -> None:
    victim = max(s[3] for s in load.seen[-RATE:] if s[1] == "2")
    os.kill(victim, signal.SIGKILL)
    killed = time.time()
    time.sleep(1.5)
    assert [s for s in load.seen if s[3] == victim and s[0] > killed + 1.0] == []
    assert [s for s in load.seen if s[0] > killed + 1.0]  # the others answer
    wait_for(lambda: _ready(client, 2, 2) and any(
        e.kind == "replica" for e in client.service("digits").events), 60,
        "the killed replica replaced", lambda: _story(client))


def test_promote_roll_back_and_replace(exchange: UiExchange, tmp_path: Path) -> None:
    client = exchange.client
    load = Load(_start(exchange, tmp_path) + "predict", exchange.token)
    thread = threading.Thread(target=load.run, daemon=True)
    thread.start()
    try:
        time.sleep(2)
        _promote(client, load)
        _roll_back(client, load)
        _kill_a_replica(client, load)
    finally:
        load.stop()
        thread.join(timeout=10)
    assert load.failures == []
    assert load.gateway_errors(bad="3") == []  # none failed because of a switch or the kill
    counts = Counter(s[1] for s in load.seen)
    print(f"answers by version: {dict(counts)}; failures {len(load.failures)}")
    assert counts["1"] and counts["2"] and counts["3"]
    code, out = bourse(exchange, "services", "show", "digits")
    assert code == 0 and "rolled back version 3" in out and "v2" in out, out
    code, out = bourse(exchange, "services", "rollback", "digits", "-y")
    assert code == 1 and "no rollout in progress" in out, out
    code, out = bourse(exchange, "services", "stop", "digits", "-y")
    assert code == 0, out
    code, out = bourse(exchange, "services")
    assert "digits" in out and "stopped" in out, out
