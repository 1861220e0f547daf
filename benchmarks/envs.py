"""Job environments and node verification on this machine.

Environment preparation for a small requirements set through the agent's ``EnvManager``:

- cold, empty uv cache: resolve, create the venv, download (here: copy from the file://
  mirror) and install — what the first job needing these packages pays on a fresh node;
- cold, warm uv cache: a new environment whose wheels uv already holds;
- warm: the same requirements again (the agent's cached environment: a file check), in the
  same EnvManager and in a new one (an agent restart);
- baseline: ``uv venv`` + ``uv pip install`` of the same set with a warm uv cache and no
  bourse in between (what a job would pay to install its own packages every time);
- job start through the agent's runtime (StartJob to its process spawned) with the
  environment warm, against the same job naming no packages.

Then ``run_probe`` + ``verify`` as the agent runs them (storage check 100 MB, CPU matmul
benchmark 1 s). Packages come from the offline mirror (file:// only, UV_OFFLINE=1).

    python benchmarks/envs.py [--repeat 5] [--packages six,attrs,idna,packaging,tomli]

Target (issue 4): warm environment start <= 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bourse.agent.environment import JobEnvironments
from bourse.agent.envs import EnvManager, find_uv
from bourse.agent.indexes import PackageSources
from bourse.agent.probe.report import ProbeOptions, run_probe
from bourse.agent.runtime import Runtime
from bourse.agent.spool import Spool
from bourse.core.compute import Compute
from bourse.core.verification import verify
from bourse.protocol.agent import StartJob
from bourse.protocol.common import JobSpec

SOURCES = PackageSources(index_url=Path("/opt/pypi/simple").as_uri(), find_links=("/opt/wheels",))


async def ensure_s(manager: EnvManager, packages: list[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    env = await manager.ensure(packages)
    return time.perf_counter() - started, env.built


def baseline_s(root: Path, packages: list[str], uv: str) -> float:
    venv = root / f"plain-{time.monotonic_ns()}"
    started = time.perf_counter()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                    *SOURCES.uv_args(), *packages], check=True)
    return time.perf_counter() - started


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms"


async def environments(packages: list[str], repeat: int) -> None:
    uv = find_uv()
    assert uv is not None, "uv is not installed next to this Python"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["UV_CACHE_DIR"] = str(root / "uv-cache")  # empty: truly cold
        cold_empty, built = await ensure_s(EnvManager(root / "a", sources=SOURCES), packages)
        assert built
        os.environ.pop("UV_CACHE_DIR")  # the machine's uv cache from here on
        colds, warms, restarts, plains = [], [], [], []
        for i in range(repeat):
            manager = EnvManager(root / f"env{i}", sources=SOURCES)
            seconds, built = await ensure_s(manager, packages)
            assert built
            colds.append(seconds)
            seconds, built = await ensure_s(manager, packages)
            assert not built
            warms.append(seconds)
            seconds, built = await ensure_s(EnvManager(root / f"env{i}", sources=SOURCES),
                                            packages)
            assert not built
            restarts.append(seconds)
            plains.append(baseline_s(root, packages, uv))
    warm = statistics.median(warms)
    print(f"environment of {len(packages)} requirements ({', '.join(packages)}), "
          f"median of {repeat}:")
    print(f"  cold, empty uv cache      {cold_empty * 1000:8.1f} ms (once)")
    print(f"  cold, warm uv cache       {median_ms(colds)}")
    print(f"  baseline uv venv+install {median_ms(plains)}  (every job, no environment cache)")
    print(f"  warm (cached environment) {median_ms(warms)}  "
          f"target <= 1000 ms: {'met' if warm <= 1.0 else 'MISSED'}")
    print(f"  warm after agent restart  {median_ms(restarts)}")
    with tempfile.TemporaryDirectory() as tmp:
        with_env, without = await job_starts(Path(tmp), packages, repeat)
    print(f"  job start, warm environment {with_env * 1000:6.1f} ms vs no packages "
          f"{without * 1000:.1f} ms (StartJob to process spawned)")
    print(f"  ratios: cold/warm {statistics.median(colds) / warm:,.0f}x, "
          f"baseline/warm {statistics.median(plains) / warm:,.0f}x, "
          f"empty-cache cold/warm {cold_empty / warm:,.0f}x")


async def job_starts(root: Path, packages: list[str], repeat: int) -> tuple[float, float]:
    """Median seconds from StartJob to the process spawned: warm environment, no packages."""
    spool = Spool(root / "spool.db")
    hooks = JobEnvironments(EnvManager(root / "envs", sources=SOURCES), lambda: None,
                            path="/usr/bin:/bin")
    runtime = Runtime(root / "work", spool, hooks=hooks)
    await runtime.start(_start("warm-up", packages))
    timings: dict[bool, list[float]] = {True: [], False: []}
    for i in range(repeat):
        for named in (True, False):
            started = time.perf_counter()
            await runtime.start(_start(f"j{i}{named}", packages if named else []))
            timings[named].append(time.perf_counter() - started)
    await asyncio.sleep(0.2)
    await runtime.close()
    spool.close()
    return statistics.median(timings[True]), statistics.median(timings[False])


def _start(job_id: str, packages: list[str]) -> StartJob:
    return StartJob(job_id=job_id, attempt=1, spec=JobSpec(
        command=["true"], compute=Compute(packages=packages)))


def probe_and_verify() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        report = run_probe(ProbeOptions(Path(tmp), storage_mb=100))
        probed = time.perf_counter() - started
        verdict = verify(report)
        total = time.perf_counter() - started
    storage = report.storage
    print(f"probe + verification on this machine ({len(report.gpus)} GPU(s), "
          f"{report.host.cpu_logical_cores} CPUs): {total:.2f} s")
    print(f"  probe {probed:.2f} s, of which checks {report.checks_s:.2f} s "
          f"(storage 100 MB: write {storage.write_mb_s if storage else None} MB/s, "
          f"read {storage.read_mb_s if storage else None} MB/s; CPU matmul "
          f"{report.benchmarks[0].tflops if report.benchmarks else None} TFLOPS); "
          f"verify {(total - probed) * 1000:.1f} ms; verdict {verdict.status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--packages", default="six,attrs,idna,packaging,tomli")
    args = parser.parse_args()
    os.environ["UV_OFFLINE"] = "1"
    asyncio.run(environments(args.packages.split(","), args.repeat))
    probe_and_verify()


if __name__ == "__main__":
    main()
