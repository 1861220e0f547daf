"""Launching (issue 17): the exchange's own time around a cloud launch, on a real coordinator
(its scheduler and launcher loops running, SQLite) over an in-process cloud that answers at
once (``tests/server/launch_harness.ScriptedCloud``), so what is timed is bourse, not a cloud.

1. submit -> the launch call: POST /jobs of a job no node can take, to the moment the
   provider's ``launch`` is called (target <= 200 ms). Baseline, same run: the POST alone.
2. enrolment -> RUNNING: the launched machine's agent enrols with its bound token, connects
   (hello) and reports the start, to the job RUNNING (target <= 1 s; the boot itself is the
   cloud's and is not timed). Baseline: the same agent's enrol + hello round trips.
3. failover: a job whose first 5 zones fail with InsufficientInstanceCapacity; the launcher's
   tick until the 6th launches, less the time inside provider calls (target <= 2 s in all).
   Baseline: a tick that launches at once.
4. the reconciler: one pass over N tagged instances (half of them orphans), coordinator CPU
   (``time.process_time``; target <= 1 s at 1,000). Baseline: a pass over 10. Twice: over the
   in-process cloud (bourse's own work), and over moto in a process of its own through the
   real AWS provider (boto3's requests and XML parsing counted; moto's CPU not).

    python benchmarks/launch.py [--runs 5] [--instances 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "server"))

from fake_agent import FakeAgent
from launch_harness import Launching, ScriptedCloud, launching
from server_harness import capabilities, serve

from bourse.clouds.base import Instance, LaunchSpec
from bourse.core.launch import Failure
from bourse.core.states import JobState, LaunchState
from bourse.server.db.database import Database, sqlite_url
from bourse.server.db.schema import Launch, Node

A100X8 = {"gpu": "a100:8"}


class Timed(ScriptedCloud):
    """A scripted cloud that notes when each launch call arrives and how long calls took."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: list[float] = []
        self.inside = 0.0

    def launch(self, spec: LaunchSpec) -> Instance:
        t0 = time.perf_counter()
        self.arrived.append(t0)
        try:
            return super().launch(spec)
        finally:
            self.inside += time.perf_counter() - t0


async def _fresh(tmp: Path, name: str) -> str:
    url = sqlite_url(tmp / f"{name}.db")
    db = Database(url)
    await db.migrate()
    await db.close()
    return url


async def _until(check: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the benchmark's condition never held")
        await asyncio.sleep(0.001)


async def submit_to_call(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    """(submit -> launch call, the submit alone), seconds, with the loops running."""
    launch, alone = [], []
    cloud = Timed()
    url = await _fresh(tmp, "submit")
    async with launching(tmp / "submit", url, cloud=cloud, run_scheduler=True) as run:
        task = asyncio.create_task(run.launcher.run())
        try:
            for i in range(runs):
                t0 = time.perf_counter()
                await run.exchange.submit(compute=A100X8, name=f"b{i}")
                alone.append(time.perf_counter() - t0)
                await _until(lambda n=i + 1: _called(cloud, n))
                launch.append(cloud.arrived[i] - t0)
        finally:
            task.cancel()
    return launch, alone


async def _called(cloud: Timed, n: int) -> bool:
    return len(cloud.arrived) >= n


async def enrol_to_running(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    """(enrol -> RUNNING, enrol + hello alone), seconds."""
    found, base = [], []
    url = await _fresh(tmp, "enrol")
    async with launching(tmp / "enrol", url, run_scheduler=True) as run, \
            serve(run.exchange) as live:
        task = asyncio.create_task(run.launcher.run())
        try:
            for i in range(runs):
                job = await run.exchange.submit(compute=A100X8, name=f"e{i}")
                await _until(lambda n=i + 1: _made(run, n))
                t0 = time.perf_counter()
                agent = await _enrol_and_connect(run, live, i)
                hello = time.perf_counter() - t0
                start = await agent.expect("start_job")
                await agent.event(job["id"], start["attempt"], "accepted")
                await agent.event(job["id"], start["attempt"], "started", pid=1)
                await _until(lambda job_id=job["id"]: _running(run, job_id))
                found.append(time.perf_counter() - t0)
                base.append(hello)
                await agent.event(job["id"], start["attempt"], "exited", exit_code=0)
                await agent.close()
        finally:
            task.cancel()
    return found, base


async def _made(run: Launching, n: int) -> bool:
    return len(run.user_data) >= n


async def _running(run: Launching, job_id: str) -> bool:
    return (await run.exchange.job_row(job_id)).state == JobState.RUNNING


async def _enrol_and_connect(run: Launching, live: Any, index: int) -> FakeAgent:
    fields = run.user_data[index]
    made = await run.exchange.client.post(
        "/api/v1/agent/enroll", json={"name": fields["node_name"]},
        headers={"Authorization": f"Bearer {fields['enrol_token']}"})
    body = made.json()
    agent = FakeAgent(live.ws_url, body["node_id"], body["credential"],
                      capabilities(cpus=96, gpus=8, memory_gib=1152), name=fields["node_name"])
    await agent.connect()
    return agent


async def failover(tmp: Path, runs: int, zones: int = 5) -> tuple[list[float], list[float]]:
    """(exchange seconds of a tick failing over ``zones`` zones, of a tick launching at once)."""
    found, base = [], []
    for i in range(runs):
        for failing, out in ((zones, found), (0, base)):
            cloud = Timed()
            cloud.fail(Failure.CAPACITY, "InsufficientInstanceCapacity", times=failing)
            url = await _fresh(tmp, f"fo{i}-{failing}")
            async with launching(tmp / f"fo{i}-{failing}", url, cloud=cloud) as run:
                await run.exchange.submit(compute=A100X8)
                await run.exchange.tick()
                t0 = time.perf_counter()
                report = await run.tick()
                spent = time.perf_counter() - t0 - cloud.inside
                assert [t.outcome for t in report.tries][-1] == "launched"
                assert len(report.tries) == failing + 1
                out.append(spent)
    return found, base


async def reconciler(tmp: Path, runs: int, instances: int) -> tuple[list[float], list[float]]:
    """(CPU seconds of a pass over ``instances``, over 10)."""
    found, base = [], []
    for i in range(runs):
        for count, out in ((instances, found), (10, base)):
            url = await _fresh(tmp, f"rc{i}-{count}")
            async with launching(tmp / f"rc{i}-{count}", url) as run:
                await _tagged(run, count)
                t0 = time.process_time()
                ended = await run.launcher.reconcile()
                out.append(time.process_time() - t0)
                assert len(ended) == count // 2, (len(ended), count)
    return found, base


async def moto_reconciler(tmp: Path, runs: int,
                          instances: int) -> tuple[list[float], list[float]]:
    """(CPU seconds of a pass over ``instances`` on moto, over 10), through AwsProvider."""
    port = _free_port()
    moto = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-p", str(port),
                             "-H", "127.0.0.1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_up(url)
        found, base = [], []
        for i in range(runs):
            for count, out in ((instances, found), (10, base)):
                out.append(await _moto_pass(tmp / f"mrc{i}-{count}", url, count))
        return found, base
    finally:
        moto.kill()


async def _moto_pass(root: Path, url: str, count: int) -> float:
    import boto3

    from bourse.clouds.aws import AwsProvider

    session = boto3.session.Session(aws_access_key_id="AKIDBENCH",
                                    aws_secret_access_key="bench", region_name="us-east-1")
    provider = AwsProvider(["us-east-1"], endpoint_url=url, session=session)
    db_url = await _fresh(root.parent, root.name)
    async with launching(root, db_url, cloud=provider) as run:  # type: ignore[arg-type]
        exchange = await run.launcher.exchange_id()
        ec2 = session.client("ec2", endpoint_url=url)
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        made = []
        while len(made) < count:
            batch = min(500, count - len(made))
            answer = ec2.run_instances(ImageId=image, MinCount=batch, MaxCount=batch,
                                       InstanceType="t3.micro", TagSpecifications=[{
                                           "ResourceType": "instance", "Tags": [
                                               {"Key": "bourse:exchange", "Value": exchange}]}])
            made += [i["InstanceId"] for i in answer["Instances"]]
        t0 = time.process_time()
        ended = await run.launcher.reconcile()
        spent = time.process_time() - t0
        assert len(ended) == count, (len(ended), count)  # no launch rows: every one an orphan
    return spent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"moto did not start on {url}")


async def _tagged(run: Launching, count: int) -> None:
    """``count`` tagged instances: half with a live launch row, half orphans."""
    exchange = await run.launcher.exchange_id()
    now = run.exchange.clock()
    async with run.exchange.state.db.write() as session:
        for n in range(count):
            spec = LaunchSpec(launch_id=f"l-{n:06d}", exchange_id=exchange,
                              node_id=f"n-{n:06d}", project_id="default", region="us-east-1",
                              instance_type="p4d.24xlarge", user_data="",
                              client_token=f"ct-{n}")
            instance = run.cloud.launch(spec)
            if n % 2 == 0:
                session.add(Node(id=spec.node_id, name=spec.node_id, state="online",
                                 capabilities=None, keep_alive_s=5.0, last_seen=now,
                                 session=None, price=1.0, created_at=now, updated_at=now,
                                 project_id="default", tags=[], launch_id=spec.launch_id))
                session.add(Launch(id=spec.launch_id, node_id=spec.node_id, job_id=None,
                                   project_id="default", provider="aws", region="us-east-1",
                                   zone=None, instance_type="p4d.24xlarge", spot=False,
                                   price=1.0, on_demand=1.0, offer={}, client_token=f"ct-{n}",
                                   instance_id=instance.id, state=LaunchState.READY,
                                   requested_at=now, launched_at=now))


def show(label: str, values: list[float], base: list[float], target: float, unit: str, *,
         scale: float = 1000.0) -> None:
    med, bmed = statistics.median(values), statistics.median(base)
    print(f"{label:<34} min/med/max {min(values) * scale:8.1f}/{med * scale:8.1f}/"
          f"{max(values) * scale:8.1f} {unit}  baseline med {bmed * scale:7.1f} {unit} "
          f"(x{med / bmed if bmed else float('inf'):5.1f})  target <= {target:g} {unit}  "
          f"{'OK' if med * scale <= target else 'MISSED'}")


async def main() -> None:
    logging.disable(logging.WARNING)  # the coordinators' start-up notes, not figures
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--instances", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bourse-bench-launch-") as tmp:
        root = Path(tmp)
        calls = await submit_to_call(root, args.runs)
        show("submit -> launch call", *calls, 200, "ms")
        running = await enrol_to_running(root, args.runs)
        show("enrolment -> RUNNING", *running, 1000, "ms")
        fo = await failover(root, args.runs)
        show("failover over 5 failing zones", *fo, 2000, "ms")
        rc = await reconciler(root, max(1, args.runs // 2), args.instances)
        show(f"reconciler pass, {args.instances} instances", *rc, 1000, "ms CPU")
        mrc = await moto_reconciler(root, max(1, args.runs // 2), args.instances)
        show("  the same on moto, boto3 counted", *mrc, 1000, "ms CPU")


if __name__ == "__main__":
    asyncio.run(main())
