"""How data failures end jobs on a real exchange: a missing input fails the start with the
reason, an output that cannot be uploaded fails a job that exited 0, and an agent restarted
between a job's exit and its upload uploads when it adopts the attempt."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest
from data_jobs import WRITE_OUTPUT, python
from dataplane_harness import DATASETS, RESULTS, DataExchange

from bourse.protocol.common import JobSpec
from bourse.sdk.errors import ApiInvalidInput

pytestmark = pytest.mark.slow


def test_a_missing_input_fails_the_start(dx: DataExchange) -> None:
    spec = JobSpec(command=python("print('never')"),
                   inputs={"data": f"s3://{DATASETS}/nothing-here/"})
    job = dx.exchange.wait_ended(dx.exchange.client.submit(spec).id, 60)
    assert job.state == "FAILED"
    assert job.reason is not None
    assert job.reason.startswith("could not start: inputs: input 'data': no object at "
                                 f"s3://{DATASETS}/nothing-here/"), job.reason
    assert job.attempts[0].started_at is None


def test_an_output_to_a_bucket_that_does_not_exist_is_refused_at_submit(
        dx: DataExchange) -> None:
    """Before the training, not after it (a failed upload of outputs that were accepted is
    tests/server/test_dataplane.py's, with an injected store fault)."""
    spec = JobSpec(command=python(WRITE_OUTPUT),
                   outputs={"model": "s3://no-such-bucket-here/model/"})
    before = len(dx.exchange.client.jobs())
    with pytest.raises(ApiInvalidInput, match="bucket no-such-bucket-here does not exist"):
        dx.exchange.client.submit(spec)
    assert len(dx.exchange.client.jobs()) == before


def test_outputs_are_uploaded_by_an_agent_restarted_after_the_exit(dx: DataExchange,
                                                                  tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = textwrap.dedent(f"""
        import os, pathlib, time
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        pathlib.Path(os.environ["BOURSE_OUTPUT_MODEL"], "weights.txt").write_text("late")
    """)
    model = f"s3://{RESULTS}/{uuid.uuid4().hex[:8]}/model/"
    job_id = dx.exchange.client.submit(JobSpec(command=python(script),
                                               outputs={"model": model})).id
    dx.exchange.wait_running(job_id)
    dx.agent.kill9()  # the job lives on, in its own session
    go.touch()
    exit_file = dx.agent.attempt_dir(job_id, 1) / "exit"
    dx.exchange.wait_for(exit_file.exists, 30, "the job to exit while its agent is down")
    dx.agent.proc.start()
    job = dx.exchange.wait_ended(job_id, 60)
    assert job.state == "SUCCEEDED", job.reason
    assert job.outputs == {"model": model}
    bucket, _, prefix = model.removeprefix("s3://").partition("/")
    body = dx.s3.get_object(Bucket=bucket, Key=prefix + "weights.txt")["Body"].read()
    assert body == b"late"
    dx.exchange.wait_connected(dx.agent)
