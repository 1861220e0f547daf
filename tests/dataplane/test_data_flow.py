"""Data flowing through jobs on a real exchange with its embedded SeaweedFS: inputs
prefetched into the node's cache, outputs uploaded and recorded, checkpoints written directly,
a later job reading an earlier one's output, and a second job on the same inputs served from
the cache; a second project that cannot name the first one's data."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from data_jobs import READ_MODEL, TRAIN, WRITE_OUTPUT, preparing, python
from dataplane_harness import DATASETS, RESULTS, DataExchange

from bourse.protocol.common import JobSpec
from bourse.sdk.bundle import pack
from bourse.sdk.client import Client
from bourse.sdk.errors import ApiInvalidInput, ApiNotFound, Forbidden
from bourse.sdk.logs import LogDecoder

pytestmark = pytest.mark.slow
DIGITS = {f"digits/{n}.txt": str(n).encode() * (n + 1) for n in range(5)} | {
    "digits/more/9.txt": b"9" * 10}

READ_SHARED = "import os, pathlib; print(pathlib.Path(os.environ['BOURSE_INPUT_D'], '0.txt')" \
              ".read_text())"


def stdout(dx: DataExchange, job_id: str) -> str:
    decoder = LogDecoder()
    text = "".join(decoder.decode(c) for c in dx.exchange.client.iter_logs(job_id)
                   if c.stream == "stdout")
    return text + "".join(t for s, t in decoder.finish() if s == "stdout")


def run(dx: DataExchange, spec: JobSpec, timeout: float = 60.0) -> str:
    job = dx.exchange.client.submit(spec)
    return dx.exchange.wait_ended(job.id, timeout).id


def test_data_flows_between_jobs(dx: DataExchange) -> None:
    for key, body in DIGITS.items():
        dx.s3.put_object(Bucket=DATASETS, Key=key, Body=body)
    model = f"s3://{RESULTS}/{uuid.uuid4().hex[:8]}/model/"
    client = dx.exchange.client

    train = run(dx, JobSpec(command=python(TRAIN), inputs={"data": f"s3://{DATASETS}/digits/"},
                            outputs={"model": model}))
    job = client.job(train)
    assert job.state == "SUCCEEDED", (job.reason, stdout(dx, train))
    assert job.outputs == {"model": model}
    report = json.loads(stdout(dx, train))
    assert report["files"] == sorted(k.removeprefix("digits/") for k in DIGITS)
    assert report["total"] == sum(len(b) for b in DIGITS.values())
    assert report["leaked"] == []  # no bourse token (node credential) in the job's environment
    checkpoint = job.spec.checkpoint
    assert checkpoint == f"s3://bourse/jobs/{train}/checkpoints/"
    listed = dx.s3.list_objects_v2(Bucket="bourse", Prefix=f"jobs/{train}/checkpoints/")
    assert [o["Key"] for o in listed["Contents"]] == [f"jobs/{train}/checkpoints/step-1/state.bin"]
    first = preparing(client.events(train))
    assert first and first[-1]["downloaded"] == report["total"], first

    reader = run(dx, JobSpec(command=python(READ_MODEL), inputs={"model": model}))
    assert client.job(reader).state == "SUCCEEDED", client.job(reader).reason
    assert stdout(dx, reader).strip() == f"trained on {report['total']} bytes"

    again = run(dx, JobSpec(command=python(TRAIN), inputs={"data": f"s3://{DATASETS}/digits/"},
                            outputs={"model": model}))
    assert client.job(again).state == "SUCCEEDED", client.job(again).reason
    ready = preparing(client.events(again))[-1]
    assert (ready["downloaded"], ready["cached"]) == (0, report["total"]), ready
    assert "0 B downloaded" in ready["text"]


def test_code_bundles_live_in_the_store(dx: DataExchange, tmp_path: Path) -> None:
    """Uploaded through the API into the store; the agent reads it there with the attempt's
    key (not through the coordinator) for a job with data, and through the coordinator,
    which streams it from the store, for a job without."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "hello.txt").write_text("from the bundle\n")
    bundle = pack(tmp_path / "code", out=tmp_path / "code.tar.gz")
    client = dx.exchange.client
    assert client.ensure_bundle(bundle.path, bundle.sha256)
    stored = dx.s3.head_object(Bucket="bourse", Key=f"bundles/{bundle.sha256}.tar.gz")
    assert stored["ContentLength"] == bundle.size
    assert not list((dx.exchange.coordinator.data_dir / "bundles").rglob(bundle.sha256))
    checkpoint = f"s3://{RESULTS}/{uuid.uuid4().hex[:8]}/ckpt/"
    job = run(dx, JobSpec(command=["cat", "hello.txt"], bundle=bundle.sha256,
                          checkpoint=checkpoint))
    assert client.job(job).state == "SUCCEEDED", client.job(job).reason
    assert stdout(dx, job) == "from the bundle\n"
    agent_log = dx.agent.proc.log.read_bytes()
    assert b"not read from the store" not in agent_log
    assert b"/api/v1/bundles/" not in agent_log  # httpx logs every request the agent makes
    assert client.bundle_exists(bundle.sha256)

    (dx.agent.work_dir / "bundles" / f"{bundle.sha256}.tar.gz").unlink()  # fetch it again
    plain = run(dx, JobSpec(command=["cat", "hello.txt"], bundle=bundle.sha256))
    assert client.job(plain).state == "SUCCEEDED", client.job(plain).reason
    assert stdout(dx, plain) == "from the bundle\n"
    assert f"GET {dx.exchange.coordinator.url}/api/v1/bundles/{bundle.sha256}".encode() in \
        dx.agent.proc.log.read_bytes()


def test_logs_of_ended_jobs_move_to_the_store_and_still_read(dx: DataExchange) -> None:
    lines = [f"line {n}" for n in range(200)]
    job_id = run(dx, JobSpec(command=python(f"print('\\n'.join({lines!r}))")))
    key = f"logs/{job_id}.jsonl.gz"

    def archived() -> bool:
        listed = dx.s3.list_objects_v2(Bucket="bourse", Prefix=key)
        return bool(listed.get("Contents"))

    dx.exchange.wait_for(archived, 30.0, f"the logs of {job_id} in the store")
    assert stdout(dx, job_id).splitlines() == lines  # read back from the archive


def test_projects_do_not_share_their_data(dx: DataExchange) -> None:
    """A second project on the same store: it can neither read the first one's output (a job
    of the first project can, later) nor its archived logs, nor sum it up; data put in the
    store outside bourse is read by both."""
    admin = dx.exchange.client
    admin.create_project("beta-e2e")
    beta = Client(admin.url, admin.create_token("beta-e2e").token, timeout=10)
    dx.s3.put_object(Bucket=DATASETS, Key="shared/0.txt", Body=b"shared")
    model = f"s3://{RESULTS}/{uuid.uuid4().hex[:8]}/model/"
    writer = run(dx, JobSpec(command=python(WRITE_OUTPUT), outputs={"model": model}))
    assert admin.job(writer).state == "SUCCEEDED", admin.job(writer).reason

    with pytest.raises(Forbidden, match="belongs to another project"):
        beta.submit(JobSpec(command=["true"], inputs={"model": model}))
    with pytest.raises(Forbidden, match="belongs to another project"):
        beta.submit(JobSpec(command=["true"], outputs={"model": model + "evil/"}))
    with pytest.raises(ApiInvalidInput, match="keeps for itself"):
        beta.submit(JobSpec(command=["true"], inputs={"logs": f"s3://bourse/logs/{writer}"
                                                                ".jsonl.gz"}))
    with pytest.raises(ApiNotFound):
        beta.data_summary(model)
    assert admin.data_summary(model).objects == 1
    shared = JobSpec(command=python(READ_SHARED), inputs={"d": f"s3://{DATASETS}/shared/"})
    assert admin.job(run(dx, shared)).state == "SUCCEEDED"
    theirs = beta.submit(shared).id
    assert dx.exchange.wait_ended(theirs, 60).state == "SUCCEEDED"

    reader = run(dx, JobSpec(command=python(READ_MODEL), inputs={"model": model}))
    assert admin.job(reader).state == "SUCCEEDED", admin.job(reader).reason
    assert stdout(dx, reader).strip() == "w"


LIGHTNING_LOGS = ("mkdir -p lightning_logs/version_0/checkpoints && echo loss > "
                  "lightning_logs/version_0/metrics.csv && echo w > "
                  "lightning_logs/version_0/checkpoints/epoch=0-step=4.ckpt && exit 3")


def test_lightning_logs_are_an_output_of_the_job_however_it_ended(dx: DataExchange) -> None:
    """A job that may run on spot has a place in the store: the lightning_logs/ it left is
    kept there (attempt 1's below 1/) though it failed, and listed in its outputs."""
    client = dx.exchange.client
    failed = run(dx, JobSpec(command=["sh", "-c", LIGHTNING_LOGS],
                             compute={"cpus": 1, "spot": "prefer"}))
    job = client.job(failed)
    kept = f"s3://bourse/jobs/{failed}/lightning_logs/"
    assert (job.state, job.outputs) == ("FAILED", {"lightning_logs": kept}), job.reason
    listed = dx.s3.list_objects_v2(Bucket="bourse", Prefix=f"jobs/{failed}/lightning_logs/")
    assert sorted(o["Key"].split("/lightning_logs/")[1] for o in listed["Contents"]) == [
        "1/version_0/checkpoints/epoch=0-step=4.ckpt", "1/version_0/metrics.csv"]
    summary = client.data_summary(kept)  # what the job's project may read of it
    assert (summary.objects, summary.bytes) == (2, len("loss\n") + len("w\n"))
    assert any("lightning_logs/ kept: 2 file(s)" in e.message for e in client.events(failed))


def test_a_job_without_a_place_in_the_store_says_it_did_not_keep_them(
        dx: DataExchange) -> None:
    client = dx.exchange.client
    plain = run(dx, JobSpec(command=["sh", "-c", LIGHTNING_LOGS]))  # no data, never spot
    assert client.job(plain).outputs is None
    messages = [e.message for e in client.events(plain)]
    assert any(m.startswith("lightning_logs/ was not kept") for m in messages), messages
