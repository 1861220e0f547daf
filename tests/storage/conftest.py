"""Fixtures of the storage tests: one real SeaweedFS per test session (per xdist worker), a fresh
bucket per test. Nothing is skipped: when `weed` cannot start, every test that needs it fails
with the supervisor's error, which carries the server's log."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from bourse.storage import SeaweedServer, Stores


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    server = SeaweedServer(tmp_path_factory.mktemp("seaweed"))
    server.start()  # raises SeaweedError with the log tail: the tests fail, loudly
    yield server
    server.stop()


def s3_client(server: SeaweedServer, key_id: str | None = None,
              secret: str | None = None) -> Any:
    return boto3.client(
        "s3", endpoint_url=server.endpoint, region_name="us-east-1",
        aws_access_key_id=key_id or server.root_key.access_key_id,
        aws_secret_access_key=secret or server.root_key.secret_access_key,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


@pytest.fixture
def root_s3(seaweed: SeaweedServer) -> Any:
    return s3_client(seaweed)


@pytest.fixture
def bucket(seaweed: SeaweedServer, root_s3: Any) -> Iterator[str]:
    """A new, empty bucket, deleted with its objects after the test (which frees its volume)."""
    name = f"t-{uuid.uuid4().hex[:16]}"
    root_s3.create_bucket(Bucket=name)
    yield name
    for page in root_s3.get_paginator("list_objects_v2").paginate(Bucket=name):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            root_s3.delete_objects(Bucket=name, Delete={"Objects": keys})
    root_s3.delete_bucket(Bucket=name)


@pytest.fixture
def stores(seaweed: SeaweedServer) -> Stores:
    return Stores(seaweed.settings())


@pytest.fixture
def make_tree(tmp_path: Path) -> Any:
    def make(files: dict[str, bytes], name: str = "tree") -> Path:
        root = tmp_path / name
        for rel, data in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        return root
    return make
