"""Fixtures of the storage tests: one real SeaweedFS per test session (per xdist worker), a fresh
bucket per test. Nothing is skipped: when `weed` cannot start, every test that needs it fails
with the supervisor's error, which carries the server's log."""

from __future__ import annotations

import datetime
import ipaddress
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bourse.storage import SeaweedServer, Stores, TLSFiles


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


def made_bucket(client: Any) -> Iterator[str]:
    """A new, empty bucket (through the boto3 ``client``), deleted with its objects when the
    generator is closed (which frees its volume)."""
    name = f"t-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=name)
    yield name
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=name, Delete={"Objects": keys})
    client.delete_bucket(Bucket=name)


@pytest.fixture
def bucket(seaweed: SeaweedServer, root_s3: Any) -> Iterator[str]:
    """A new, empty bucket, deleted with its objects after the test."""
    yield from made_bucket(root_s3)


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


def make_tls(folder: Path, host: str = "127.0.0.1") -> TLSFiles:
    """A certificate authority and a server certificate it signed for ``host`` (an IP), as
    PEM files: what a private store's operator would have."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bourse test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = TLSFiles(folder / "cert.pem", folder / "key.pem", folder / "ca.pem")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))  # type: ignore[union-attr]
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


@pytest.fixture(scope="session")
def tls_seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A SeaweedFS whose S3 gateway also serves https, with a certificate from a test CA."""
    folder = tmp_path_factory.mktemp("tls-seaweed")
    server = SeaweedServer(folder / "data", tls=make_tls(folder / "tls"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def tls_bucket(tls_seaweed: SeaweedServer) -> Iterator[str]:
    """A new, empty bucket on the TLS SeaweedFS, deleted with its objects after the test."""
    client = s3_client(tls_seaweed)
    name = f"t-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=name)
    yield name
    for listed in client.list_objects_v2(Bucket=name).get("Contents", []):
        client.delete_object(Bucket=name, Key=listed["Key"])
    client.delete_bucket(Bucket=name)
