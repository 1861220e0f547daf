"""Issue 17 end to end, with real processes and a simulated AWS account: a coordinator
(`bourse server --cloud aws`, embedded store) whose boto3 calls go to moto through the fault
proxy; an exchange with no GPU node at all. A Lightning job asking for 8 H100s on spot
launches the cheapest matching instance; the instance's user data (read back from the
simulator) boots on this machine (``boot.py``: its own root, an nvidia-smi replaying a real
8x H100 capture, its own metadata service); the agent enrols with the token bound to the
instance, is verified, runs the job and streams its logs; a spot interruption notice on the
metadata service checkpoints the job, which resumes from that checkpoint on a second
launched instance; that one is terminated after the idle timeout; `bourse cost` shows what
both cost from launch to termination.

Then the coordinator is killed (`kill -9`, through ``BOURSE_TEST_CRASH_AT``) at each step of
a launch: after the restart exactly the instances that should exist exist.
"""

from __future__ import annotations

import base64
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from boot import Machine, boot
from sim import CREDENTIALS, Sim

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agent"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "dataplane"))

from dataplane_harness import stop
from harness import Cluster, Exchange
from imds_stub import ImdsStub

from bourse.protocol.common import JobSpec

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*LeafSpec.*")]
CAPTURE = "txt-h100-80gb-hbm3-x8-drv535.txt"  # a p5.48xlarge's GPUs
REGION = "us-east-1"
JOB = Path(__file__).resolve().parent.parent / "spot" / "digits_job.py"
# about 3 s an epoch: the agent looks at the metadata service every 5 s, and the notice
# must find the job still training
EPOCHS, STEP_SLEEP = "6", "0.2"
NOTICE_S = 30  # EC2 gives two minutes; the job needs less to save
IDLE_S = 6


def _ec2(sim: Sim) -> Any:
    return sim.client("ec2", REGION)


def image(sim: Sim) -> str:
    images = _ec2(sim).describe_images(Owners=["amazon"], Filters=[
        {"Name": "architecture", "Values": ["x86_64"]}])["Images"]
    return str(sorted(i["ImageId"] for i in images)[0])


def coordinator(root: Path, sim: Sim, *, crash_at: str | None = None,
                store: tuple[str, ...] = ()) -> Exchange:
    env = {"AWS_ENDPOINT_URL": sim.url, "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
           "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
           "AWS_DEFAULT_REGION": REGION}
    if crash_at:
        env["BOURSE_TEST_CRASH_AT"] = crash_at
    args = ["--cloud", "aws", "--aws-regions", REGION, "--aws-image", image(sim),
            "--idle-timeout", f"{IDLE_S}s", "--boot-timeout", "3m"]
    return Exchange(Cluster(root), 1.0, store=store, loss_window=10.0, args=args, env=env)


def instances(sim: Sim, job_id: str | None = None, *, alive: bool = True) -> list[dict[str, Any]]:
    filters = [{"Name": "tag-key", "Values": ["bourse:exchange"]}]
    if job_id is not None:
        filters.append({"Name": "tag:bourse:job", "Values": [job_id]})
    found = [i for r in _ec2(sim).describe_instances(Filters=filters)["Reservations"]
             for i in r["Instances"]]
    ended = ("shutting-down", "terminated")
    return [i for i in found if (i["State"]["Name"] not in ended) == alive]


def user_data(sim: Sim, instance_id: str) -> str:
    answer = _ec2(sim).describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    return base64.b64decode(answer["UserData"]["Value"]).decode()


def wait_instances(exchange: Exchange, sim: Sim, job_id: str, count: int) -> list[dict[str, Any]]:
    return exchange.wait_for(lambda: (found := instances(sim, job_id)) and len(found) >= count
                             and found, 60, f"{count} instance(s) launched for {job_id}")


@pytest.fixture
def machines() -> Iterator[list[Machine]]:
    made: list[Machine] = []
    yield made
    for machine in made:
        machine.stop()


def test_a_gpu_job_on_an_exchange_with_no_gpu_node(tmp_path: Path, sim: Sim,
                                                   machines: list[Machine]) -> None:
    exchange = coordinator(tmp_path, sim).start()
    metadata = [ImdsStub(), ImdsStub()]
    try:
        _run_the_story(exchange, sim, metadata, machines, tmp_path)
    finally:
        for stub in metadata:
            stub.close()
        stop(exchange)  # the coordinator, then its embedded store, then what is left


def _run_the_story(exchange: Exchange, sim: Sim, metadata: list[ImdsStub],
                   machines: list[Machine], root: Path) -> None:
    client = exchange.client
    aws = exchange.wait_for(lambda: _checked(exchange), 30, "the clouds' check")
    assert aws.enabled and aws.identity is not None and aws.regions == [REGION]
    job = client.submit(JobSpec(command=[sys.executable, str(JOB), EPOCHS, STEP_SLEEP],
                                compute={"gpu": "h100:8", "spot": "prefer"}))
    [first] = wait_instances(exchange, sim, job.id, 1)
    assert first["InstanceType"] == "p5.48xlarge"
    assert first["InstanceLifecycle"] == "spot"
    waiting = client.job(job.id)
    assert waiting.state == "PENDING" and waiting.pending_reason is not None
    assert waiting.pending_reason.startswith(f"launching aws {REGION}")
    launching = [n for n in client.nodes() if n.state in ("launching", "booting")]
    assert len(launching) == 1

    machines.append(boot(user_data(sim, first["InstanceId"]), CAPTURE, root / "machine-1",
                         env={"BOURSE_METADATA_URL": metadata[0].url}))
    running = exchange.wait_job(job.id, lambda j: j.state == "RUNNING", 120, "to run")
    node = next(n for n in client.nodes() if n.id == running.node_id)
    assert node.verification_status in ("pass", "warn") and node.state == "online"
    exchange.wait_for(lambda: b"epoch 1 " in _stdout(machines[0], job.id), 90, "an epoch")

    goes_at = metadata[0].notice("terminate", time.time() + NOTICE_S)
    exchange.wait_job(job.id, lambda j: j.attempts[0].state == "PREEMPTED", 60, "preempted")
    machines[0].stop()  # the cloud takes the machine back
    second = exchange.wait_for(
        lambda: [i for i in instances(sim, job.id) if i["InstanceId"] != first["InstanceId"]],
        60, "a second instance")[0]
    assert second["Placement"]["AvailabilityZone"] != first["Placement"]["AvailabilityZone"] \
        or second.get("InstanceLifecycle") != "spot"  # elsewhere: another zone, or on demand
    machines.append(boot(user_data(sim, second["InstanceId"]), CAPTURE, root / "machine-2",
                         env={"BOURSE_METADATA_URL": metadata[1].url}))
    done = exchange.wait_ended(job.id, timeout=180)
    assert done.state == "SUCCEEDED", done.reason
    _preempted_on_the_notice(exchange, done, metadata[0], goes_at)
    assert "resume=1 from /" in _logs(exchange, job.id).decode()  # from the notice's save

    exchange.wait_for(lambda: not instances(sim, job.id), IDLE_S + 60,
                      "the instances terminated (the first reclaimed, the second idle)")
    cost = client.cost()
    launched = {v.instance_id: v for v in cost.launched}
    assert set(launched) == {first["InstanceId"], second["InstanceId"]}
    idle = launched[second["InstanceId"]]
    assert idle.state == "terminated" and "idle" in (idle.reason or "")
    assert idle.idle_s >= IDLE_S - 1 and idle.cost > 0 and idle.boot_s is not None


def _preempted_on_the_notice(exchange: Exchange, done: Any, metadata: ImdsStub,
                             goes_at: float) -> None:
    """The notice was read with an IMDSv2 token, made the job save, ended its attempt
    PREEMPTED before the machine went, and was relayed to the coordinator once."""
    first, second = done.attempts
    assert metadata.gets > 0 and metadata.refused == 0
    assert first.exit_code == 143  # Lightning stopped on SIGTERM, after saving
    assert first.preempted_at is not None and first.checkpoint_at is not None
    assert first.checkpoint_at >= first.preempted_at and first.lost_work_s == 0.0
    assert first.ended_at is not None and first.ended_at < goes_at
    assert second.state == "SUCCEEDED" and second.node_id != first.node_id
    notes = [e.message for e in exchange.client.events(done.id) if e.kind == "preemption"]
    assert len(notes) == 1 and "spot interruption notice: terminate at" in notes[0]


def _stdout(machine: Machine, job_id: str, attempt: int = 1) -> bytes:
    path = machine.work_dir / "jobs" / job_id / str(attempt) / "logs" / "stdout"
    return path.read_bytes() if path.exists() else b""


def _checked(exchange: Exchange) -> Any:
    [aws] = [c for c in exchange.client.clouds().clouds if c.name == "aws"]
    return aws if aws.enabled or not aws.reason.startswith("not checked") else None


def _logs(exchange: Exchange, job_id: str) -> bytes:
    """Everything the job printed, as the coordinator has it (streamed from the nodes)."""
    out, after = b"", 0
    while True:
        page = exchange.client.logs(job_id, after=after)
        out += b"".join(base64.b64decode(c.data) for c in page.chunks if c.stream == "stdout")
        if not page.chunks:
            return out
        after = page.cursor


@pytest.mark.parametrize("step", ["before-call", "after-call"])
def test_a_coordinator_killed_mid_launch_leaves_exactly_what_should_exist(
        tmp_path: Path, sim: Sim, step: str) -> None:
    """The two places a crash can fall: the launch committed and the cloud not called yet
    (``after-request`` is the same state, a line earlier), and the cloud called but its
    answer not committed."""
    exchange = coordinator(tmp_path, sim, crash_at=step, store=("--no-store",)).start()
    try:
        job = exchange.client.submit(JobSpec(command=["true"], compute={"gpu": "h100:8"}))
        proc = exchange.coordinator.proc
        exchange.wait_for(lambda: not proc.alive, 60, f"the coordinator to die {step}")
        made = instances(sim, job.id)
        assert len(made) == (1 if step == "after-call" else 0)
        proc.env.pop("BOURSE_TEST_CRASH_AT")
        exchange.coordinator.start()
        exchange.wait_for(lambda: _one_live_launch(exchange), 60, "one live launch after")
        [instance] = exchange.wait_for(lambda: instances(sim, job.id), 60, "its instance")
        if made:  # the crash fell after the call: the instance is adopted, not duplicated
            assert instance["InstanceId"] == made[0]["InstanceId"]
        time.sleep(2)  # a reconciler pass and a launcher tick more change nothing
        assert [i["InstanceId"] for i in instances(sim, job.id)] == [instance["InstanceId"]]
        [live] = exchange.client.launches(live=True)
        assert live.instance_id == instance["InstanceId"] and live.job_id == job.id
        exchange.client.cancel(job.id)
        exchange.wait_for(lambda: not instances(sim, job.id), 60, "no instance left")
    finally:
        stop(exchange)


def _one_live_launch(exchange: Exchange) -> bool:
    live = exchange.client.launches(live=True)
    return len(live) == 1 and live[0].instance_id is not None
