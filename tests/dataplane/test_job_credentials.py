"""Job-scoped credentials on a real exchange: a job can read its inputs and write its own
prefixes and nothing else, its key stops working once the attempt has ended, and the secret
never reaches a log, the timeline or the spool's event data."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from data_jobs import PROBE, python
from dataplane_harness import DATASETS, DataExchange

from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
DENIED = "AccessDenied"


def job_client(keys: dict[str, str]) -> Any:
    return boto3.client("s3", endpoint_url=keys["endpoint"], region_name="us-east-1",
                        aws_access_key_id=keys["id"], aws_secret_access_key=keys["secret"],
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


def refused(client: Any) -> bool:
    try:
        client.get_object(Bucket=DATASETS, Key="probe/0.txt")
    except ClientError as exc:
        return exc.response["Error"]["Code"] in ("InvalidAccessKeyId", DENIED)
    return False


def places(dx: DataExchange, job_id: str) -> dict[str, bytes]:
    """Everything stored about the job where a secret must never be: logs, timeline, the
    agent's and coordinator's logs, SeaweedFS's log, the spool's event rows."""
    client = dx.exchange.client
    found = {"job logs": b"".join(base64.b64decode(c.data) for c in client.iter_logs(job_id)),
             "timeline": json.dumps([e.model_dump() for e in client.events(job_id)]).encode(),
             "job view": client.job(job_id).model_dump_json().encode()}
    found |= {p.name: p.log.read_bytes() for p in dx.cluster.procs}
    found["weed.log"] = (dx.store_dir / "weed.log").read_bytes()
    with sqlite3.connect(dx.agent.work_dir / "spool.db") as spool:
        rows = spool.execute("SELECT data FROM outbox WHERE data IS NOT NULL").fetchall()
    found["spool events"] = "".join(r[0] for r in rows).encode()
    attempt = dx.agent.attempt_dir(job_id, 1)
    found |= {f"attempt {p.name}": p.read_bytes() for p in attempt.rglob("*") if p.is_file()}
    return found


def test_a_job_reaches_only_its_own_data(dx: DataExchange, tmp_path: Path) -> None:
    dx.s3.put_object(Bucket=DATASETS, Key="probe/0.txt", Body=b"0")
    dx.s3.put_object(Bucket=DATASETS, Key="private/secret.bin", Body=b"s")
    dx.s3.put_object(Bucket="bourse", Key="jobs/j-someone-else/checkpoints/secret.bin", Body=b"s")
    keys_file = tmp_path / "keys.json"
    spec = JobSpec(command=python(PROBE), inputs={"data": f"s3://{DATASETS}/probe/"},
                   env={"PROBE_KEYS": str(keys_file)})
    job_id = dx.exchange.client.submit(spec).id
    job = dx.exchange.wait_ended(job_id, 60)
    assert job.state == "SUCCEEDED", job.reason
    results = json.loads(dx.agent.stdout(job_id, 1))
    assert results == {
        "read own input": "ok", "write own checkpoint": "ok",
        "read another job's checkpoint": DENIED, "list another job's prefix": DENIED,
        "read another dataset": DENIED, "overwrite its input": DENIED,
        "write a code bundle": DENIED, "write another job's prefix": DENIED}

    keys = json.loads(keys_file.read_text())
    client = job_client(keys)
    deadline = time.monotonic() + 15
    while not refused(client):  # revoked in the background after the attempt ended
        assert time.monotonic() < deadline, "the job's key still works after it ended"
        time.sleep(0.1)

    for where, content in places(dx, job_id).items():
        assert keys["secret"].encode() not in content, f"the secret is in {where}"
