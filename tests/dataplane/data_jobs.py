"""The programs the data-plane tests run as jobs (plain Python with boto3, reading only the
environment the agent gives them), and helpers to read what happened."""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from bourse.protocol.api import EventView

S3 = textwrap.dedent("""
    import json, os, pathlib, sys
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}))

    def split(uri):
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return bucket, key

    def attempt(call, **kw):
        try:
            call(**kw)
            return "ok"
        except ClientError as exc:
            return exc.response["Error"]["Code"]
""")

TRAIN = S3 + textwrap.dedent("""
    data = pathlib.Path(os.environ["BOURSE_INPUT_DATA"])
    files = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file())
    total = sum(len(p.read_bytes()) for p in data.rglob("*") if p.is_file())
    out = pathlib.Path(os.environ["BOURSE_OUTPUT_MODEL"])
    (out / "weights.txt").write_text(f"trained on {total} bytes")
    bucket, prefix = split(os.environ["BOURSE_CHECKPOINT_URI"])
    s3.put_object(Bucket=bucket, Key=prefix + "step-1/state.bin", Body=b"s" * 1000)
    # a bourse token other than the job's own narrow ones (its MLflow run, its own burst)
    job = os.environ.get("MLFLOW_RUN_ID", "-")  # a job's run is its id
    mine = (f"bse_r_{job}_", f"bse_b_{job}_")
    leaked = [k for k, v in os.environ.items() if v.startswith("bse_") and not v.startswith(mine)]
    print(json.dumps({"files": files, "total": total, "leaked": leaked}))
""")

READ_MODEL = textwrap.dedent("""
    import os, pathlib
    print(pathlib.Path(os.environ["BOURSE_INPUT_MODEL"], "weights.txt").read_text())
""")

WRITE_OUTPUT = textwrap.dedent("""
    import os, pathlib
    pathlib.Path(os.environ["BOURSE_OUTPUT_MODEL"], "weights.txt").write_text("w")
""")


def python(script: str) -> list[str]:
    return [sys.executable, "-c", script]


def preparing(events: list[EventView]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == "preparing"]

PROBE = S3 + textwrap.dedent("""
    env = os.environ
    own_bucket, own_key = split(env["BOURSE_INPUT_DATA_URI"])
    ckpt_bucket, ckpt_prefix = split(env["BOURSE_CHECKPOINT_URI"])
    results = {
        "read own input": attempt(s3.get_object, Bucket=own_bucket, Key=own_key + "0.txt"),
        "write own checkpoint": attempt(s3.put_object, Bucket=ckpt_bucket,
                                        Key=ckpt_prefix + "x", Body=b"x"),
        "read another job's checkpoint": attempt(
            s3.get_object, Bucket="bourse", Key="jobs/j-someone-else/checkpoints/secret.bin"),
        "list another job's prefix": attempt(
            s3.list_objects_v2, Bucket="bourse", Prefix="jobs/j-someone-else/"),
        "read another dataset": attempt(s3.get_object, Bucket="datasets",
                                        Key="private/secret.bin"),
        "overwrite its input": attempt(s3.put_object, Bucket=own_bucket,
                                       Key=own_key + "0.txt", Body=b"evil"),
        "write a code bundle": attempt(s3.put_object, Bucket="bourse",
                                       Key="bundles/evil.tar.gz", Body=b"evil"),
        "write another job's prefix": attempt(
            s3.put_object, Bucket="bourse", Key="jobs/j-someone-else/checkpoints/x", Body=b"x"),
    }
    pathlib.Path(env["PROBE_KEYS"]).write_text(json.dumps({
        "id": env["AWS_ACCESS_KEY_ID"], "secret": env["AWS_SECRET_ACCESS_KEY"],
        "endpoint": env["AWS_ENDPOINT_URL"]}))
    print(json.dumps(results))
""")
