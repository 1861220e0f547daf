"""The direct reader: SigV4 against AWS's published example and botocore, ranged GETs from a
real SeaweedFS spliced into files, and the faults a store or network can cause, played by a
small scripted HTTP server on loopback (a response cut mid-body, throttling, a wrong range)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import gc
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import botocore.auth
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from bourse.storage import (
    AccessDenied,
    AccessKey,
    ContentCache,
    ObjectNotFound,
    Prefetcher,
    PrefetchOptions,
    SeaweedServer,
    StorageError,
    Stores,
    StoreSettings,
    StoreUnavailable,
    open_store,
    parse_uri,
)
from bourse.storage.direct import DirectReader, usable
from bourse.storage.remote import RemoteStore
from bourse.storage.retry import RetryPolicy
from bourse.storage.sigv4 import canonical_path, sign
from bourse.storage.store import ObjectInfo, RangeSink

pytestmark = pytest.mark.anyio

EXAMPLE_KEY = AccessKey("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_signature_matches_the_aws_documentation_example() -> None:
    """GET /test.txt with a range, from the S3 SigV4 documentation (header-based auth)."""
    signed = sign("GET", "examplebucket.s3.amazonaws.com", "/test.txt", {"Range": "bytes=0-9"},
                  EXAMPLE_KEY, region="us-east-1", payload=EMPTY_SHA256,
                  now=datetime.datetime(2013, 5, 24, tzinfo=datetime.UTC).timestamp())
    assert signed["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    assert signed["x-amz-date"] == "20130524T000000Z" and "host" not in signed


def test_signature_matches_botocore_with_a_session_token_and_an_odd_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    when = datetime.datetime(2026, 11, 30, 6, 30, 5)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when)
    key = AccessKey("AKIDEXAMPLE", "secret/+=", "token/with+chars==")
    path = canonical_path("/bucket/data/a b+c/é~(1).bin")
    request = AWSRequest("GET", f"http://127.0.0.1:8333{path}", headers={
        "Range": "bytes=5-99", "If-Match": '"abc"'})
    botocore.auth.S3SigV4Auth(Credentials("AKIDEXAMPLE", "secret/+=", "token/with+chars=="),
                              "s3", "eu-west-1").add_auth(request)
    ours = sign("GET", "127.0.0.1:8333", path, {"Range": "bytes=5-99", "If-Match": '"abc"'},
                key, region="eu-west-1", now=when.replace(tzinfo=datetime.UTC).timestamp(),
                payload=EMPTY_SHA256)  # what botocore signs a GET with
    assert path == "/bucket/data/a%20b%2Bc/%C3%A9~%281%29.bin"
    assert ours["authorization"] == request.headers["Authorization"]
    assert ours["x-amz-security-token"] == "token/with+chars=="


@pytest.mark.parametrize(("uri", "settings", "direct"), [
    ("s3://bkt", StoreSettings("http://127.0.0.1:1", access_key=EXAMPLE_KEY), True),
    ("s3://bkt", StoreSettings("https://s3.example", access_key=EXAMPLE_KEY), True),
    ("s3://bkt", StoreSettings("http://127.0.0.1:1"), False),  # credentials from the chain
    ("s3://bkt", StoreSettings("http://127.0.0.1:1", path_style=False, access_key=EXAMPLE_KEY),
     False),
    ("s3://bkt", StoreSettings("http://127.0.0.1:1", access_key=EXAMPLE_KEY,
                             options={"aws_request_payer": "true"}), False),
    ("gs://bkt", StoreSettings("http://127.0.0.1:1", access_key=EXAMPLE_KEY), False)])
def test_which_buckets_it_serves(uri: str, settings: StoreSettings, direct: bool) -> None:
    assert usable(parse_uri(uri), settings) is direct


class Sink(RangeSink):
    def __init__(self, path: Path, *, stop_after: int | None = None) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.position, self.stop_after = 0, stop_after

    def descriptor(self) -> int:
        return self.fd

    def advance(self, nbytes: int) -> bool:
        self.position += nbytes
        return self.stop_after is None or self.position < self.stop_after


@pytest.fixture
def body() -> bytes:
    return os.urandom(3 * 1024 * 1024 + 17)


async def test_ranged_reads_from_seaweedfs_land_in_the_file(
        seaweed: SeaweedServer, bucket: str, body: bytes, tmp_path: Path) -> None:
    store = open_store(f"s3://{bucket}", seaweed.settings())
    key = "data/a b+c/é~(1).bin"
    etag = await store.put(key, body)
    reader = DirectReader(parse_uri(f"s3://{bucket}"), seaweed.settings())
    sink = Sink(tmp_path / "out")
    sink.position = 100
    reader.read_into(key, 100, 2_000_000, sink, etag=etag)
    reader.read_into(key, 2_000_100, len(body) - 2_000_100, sink, etag=etag)  # same connection
    assert sink.position == len(body) and len(reader._idle) == 1
    assert (tmp_path / "out").read_bytes()[100:] == body[100:]
    with pytest.raises(StorageError, match="changed while it was downloading"):
        reader.read_into(key, 0, 10, Sink(tmp_path / "other"), etag="0" * 32)
    with pytest.raises(ObjectNotFound, match="NoSuchKey"):
        reader.read_into("no/such/key", 0, 10, Sink(tmp_path / "other"))
    wrong = seaweed.settings().with_access_key(AccessKey(seaweed.root_key.access_key_id, "x"))
    with pytest.raises(AccessDenied):
        DirectReader(parse_uri(f"s3://{bucket}"), wrong).read_into(key, 0, 10,
                                                                 Sink(tmp_path / "other"))
    reader.close()


async def test_a_sink_that_says_stop_ends_the_read_and_its_connection(
        seaweed: SeaweedServer, bucket: str, body: bytes, tmp_path: Path) -> None:
    store = open_store(f"s3://{bucket}", seaweed.settings())
    await store.put("x", body)
    reader = DirectReader(parse_uri(f"s3://{bucket}"), seaweed.settings())
    sink = Sink(tmp_path / "out", stop_after=1)
    reader.read_into("x", 0, len(body), sink)
    assert 0 < sink.position < len(body) and reader._idle == []  # the rest was not read


class Scripted:
    """An HTTP server on loopback answering ranged GETs of one object, each request the way
    the script's next step says: ``ok``, ``ok-close`` (then it closes the idle connection),
    ``cut`` (headers and half the body, then the connection closes), ``slowdown`` (503),
    ``wrong-range`` (206 for other bytes)."""

    def __init__(self, body: bytes, script: list[str]) -> None:
        self.body, self.script = body, script
        self.ranges: list[tuple[int, int]] = []
        self.connections = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # OSError: the client gave up on an answer
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, _, data = data.partition(b"\r\n\r\n")
                if not self._answer(conn, head.decode()):
                    return

    def _answer(self, conn: socket.socket, head: str) -> bool:
        headers = dict(line.split(": ", 1) for line in head.split("\r\n")[1:])
        assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=")
        first, last = map(int, headers["range"].removeprefix("bytes=").split("-"))
        self.ranges.append((first, last))
        step = self.script.pop(0) if self.script else "ok"
        if step == "slowdown":
            error = b"<Error><Code>SlowDown</Code></Error>"
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(error), error))
            return True
        if step == "wrong-range":
            first, last = first + 1, last + 1
        part = self.body[first:last + 1]
        conn.sendall(f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(part)}\r\n"
                     f"Content-Range: bytes {first}-{last}/{len(self.body)}\r\n"
                     f'ETag: "abc"\r\n\r\n'.encode())
        if step == "cut":
            conn.sendall(part[:len(part) // 2])
            return False
        conn.sendall(part)
        return step != "ok-close"  # it closes the connection once idle

    def settings(self) -> StoreSettings:
        return StoreSettings(f"http://127.0.0.1:{self.port}", access_key=EXAMPLE_KEY)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def scripted(body: bytes) -> Iterator[Scripted]:
    server = Scripted(body, [])
    yield server
    server.close()


@pytest.mark.parametrize(("step", "message"), [
    ("cut", "connection closed mid-body"), ("slowdown", "HTTP 503 SlowDown"),
    ("wrong-range", "the store answered a different range")])
def test_faults_are_transient_errors_and_the_sink_keeps_what_arrived(
        scripted: Scripted, body: bytes, tmp_path: Path, step: str, message: str) -> None:
    scripted.script.append(step)
    reader = DirectReader(parse_uri("s3://bkt"), scripted.settings())
    sink = Sink(tmp_path / "out")
    with pytest.raises(StoreUnavailable, match=message):
        reader.read_into("k", 0, len(body), sink, etag="abc")
    arrived = len(body) // 2 if step == "cut" else 0
    assert sink.position == arrived
    assert (tmp_path / "out").read_bytes() == body[:arrived]
    reader.read_into("k", sink.position, len(body) - sink.position, sink, etag="abc")
    assert (tmp_path / "out").read_bytes() == body


def test_a_pooled_connection_the_store_closed_is_replaced_at_once(
        scripted: Scripted, body: bytes, tmp_path: Path) -> None:
    scripted.script.append("ok-close")
    reader = DirectReader(parse_uri("s3://bkt"), scripted.settings())
    sink = Sink(tmp_path / "out")
    reader.read_into("k", 0, 10, sink)
    time.sleep(0.05)  # the store's close reaches the idle connection
    reader.read_into("k", 10, 10, sink)  # no error: a new connection, no retry delay
    assert scripted.ranges == [(0, 9), (10, 19)] and scripted.connections == 2
    assert (tmp_path / "out").read_bytes() == body[:20]


def open_files() -> set[str]:
    """What this process's descriptors point at (``socket:[inode]``, ``pipe:[inode]``...)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile by another thread
            found.add(os.readlink(f"/proc/self/fd/{name}"))
    return found


def pooled(reader: DirectReader) -> set[str]:
    """The socket and pipe of the reader's one pooled connection, by identity (descriptor
    numbers are reused; inodes are not)."""
    [conn] = reader._idle
    return {os.readlink(f"/proc/self/fd/{fd}")
            for fd in (conn.sock.fileno(), conn.read_end, conn.write_end)}


def test_connections_and_their_pipes_are_closed(scripted: Scripted, tmp_path: Path) -> None:
    sink = Sink(tmp_path / "out")
    settings = scripted.settings()
    stores = Stores(settings)
    store = stores(parse_uri("s3://bkt"))
    assert isinstance(store, RemoteStore) and store._direct is not None
    store.read_range_into("k", 0, 10, sink)
    held = pooled(store._direct)
    assert {h.split(":")[0] for h in held} == {"socket", "pipe"} and held <= open_files()
    stores.close()
    assert not held & open_files()
    reader = DirectReader(parse_uri("s3://bkt"), settings)
    reader.read_into("k", 0, 10, sink)
    held = pooled(reader)
    del reader  # collected without close(): its pipe is closed all the same
    gc.collect()
    assert not held & open_files()


def test_no_server_is_a_transient_error(tmp_path: Path) -> None:
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    reader = DirectReader(parse_uri("s3://bkt"),
                          StoreSettings(f"http://127.0.0.1:{port}", access_key=EXAMPLE_KEY))
    with pytest.raises(StoreUnavailable, match=f"cannot connect to 127.0.0.1:{port}"):
        reader.read_into("k", 0, 1, Sink(tmp_path / "out"))


class Listed(RemoteStore):
    """The scripted server's one object, listed without asking it (it only answers GETs)."""

    def __init__(self, server: Scripted) -> None:
        root = parse_uri("s3://bkt")
        super().__init__(root, None, direct=DirectReader(root, server.settings()))
        self.size = len(server.body)

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        return [ObjectInfo("in/k", self.size, "abc")]


async def test_prefetch_resumes_a_cut_range_where_it_stopped(
        scripted: Scripted, body: bytes, tmp_path: Path) -> None:
    scripted.script.extend(["cut", "ok", "ok", "cut"])
    store = Listed(scripted)
    options = PrefetchOptions(concurrency=1, part_size=1024 * 1024,
                              retry=RetryPolicy(attempts=3, base=0.01))
    prefetcher = Prefetcher(ContentCache(tmp_path / "cache", 1 << 30), lambda uri: store,
                            options)
    result = await prefetcher.prefetch({"in": "s3://bkt/in/"}, tmp_path / "job", holder="j")
    assert (result.paths["in"] / "k").read_bytes() == body
    mib, half = 1024 * 1024, 512 * 1024
    assert scripted.ranges == [  # each cut part resumed where it stopped, not restarted
        (0, mib - 1), (half, mib - 1), (mib, 2 * mib - 1), (2 * mib, 3 * mib - 1),
        (2 * mib + half, 3 * mib - 1), (3 * mib, len(body) - 1)]


async def test_over_tls_with_the_stores_ca_and_not_without_it(
        tls_seaweed: SeaweedServer, tls_bucket: str, body: bytes, tmp_path: Path) -> None:
    settings = tls_seaweed.settings(https=True)
    assert settings.endpoint and settings.endpoint.startswith("https://") and settings.ca_file
    etag = await open_store(f"s3://{tls_bucket}", settings).put("in/x", body)  # obstore, CA
    reader = DirectReader(parse_uri(f"s3://{tls_bucket}"), settings)
    sink = Sink(tmp_path / "out")
    reader.read_into("in/x", 0, 1000, sink, etag=etag)
    reader.read_into("in/x", 1000, len(body) - 1000, sink, etag=etag)  # the same connection
    assert (tmp_path / "out").read_bytes() == body and len(reader._idle) == 1
    untrusted = DirectReader(parse_uri(f"s3://{tls_bucket}"),
                             dataclasses.replace(settings, ca_file=None))
    with pytest.raises(StorageError, match="is not trusted") as caught:
        untrusted.read_into("in/x", 0, 10, Sink(tmp_path / "other"))
    assert "AWS_CA_BUNDLE" in str(caught.value.hint)
    reader.close()


async def test_prefetch_over_tls(tls_seaweed: SeaweedServer, tls_bucket: str, body: bytes,
                                 tmp_path: Path) -> None:
    stores = Stores(tls_seaweed.settings(https=True))
    await stores(parse_uri(f"s3://{tls_bucket}")).put("in/big", body)
    await stores(parse_uri(f"s3://{tls_bucket}")).put("in/small", body[:100])
    prefetcher = Prefetcher(ContentCache(tmp_path / "cache", 1 << 30), stores,
                            PrefetchOptions(part_size=1024 * 1024))
    result = await prefetcher.prefetch({"in": f"s3://{tls_bucket}/in/"}, tmp_path / "job",
                                       holder="j")
    assert (result.paths["in"] / "big").read_bytes() == body
    assert (result.paths["in"] / "small").read_bytes() == body[:100]
    stores.close()


def test_an_unreadable_ca_bundle_is_named(tmp_path: Path) -> None:
    settings = StoreSettings("https://127.0.0.1:1", access_key=EXAMPLE_KEY,
                             ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(StorageError, match=r"cannot read the CA bundle .*missing\.pem"):
        DirectReader(parse_uri("s3://bkt"), settings)
    with pytest.raises(StorageError, match="cannot read the CA bundle"):
        open_store("s3://bkt", settings)
