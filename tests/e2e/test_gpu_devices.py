"""MIG slices end to end: a real coordinator and a real agent whose ``nvidia-smi`` is the fake
one replaying two real captures of one H200 on driver 590 (tests/fixtures/nvidia-smi): the
``--query-gpu`` CSV (its UUID, masked by the capture script) and the plain table with MIG on
(five MIG devices, no UUIDs of their own; the two were captured at different times by the same
exporter's capture script, the CSV before MIG was enabled: the probe takes the MIG mode from
the table, beside the devices). Jobs sized by GPU memory get slices, each its own, and see it
in ``CUDA_VISIBLE_DEVICES``. No GPU runs anything here: what CUDA does with the address is not
exercised (docs/environments.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from harness import Cluster, Exchange
from job_lines import printed

from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "nvidia-smi"
FAKE_SMI = HERE.parent / "probe" / "fake_nvidia_smi.py"
H200 = "GPU-00000000-0000-0000-0000-000000000000"
# prints what it was given, then holds its slice until the test lets it go
HOLD = ("import os, pathlib, sys, time; print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\n"
        "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n")


def mig_h200_bin(root: Path) -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\n{FAKE_SMI.read_text()}")
    script.chmod(0o755)
    (bin_dir / "capture.json").write_text(json.dumps({
        "csv": str(FIXTURES / "csv-h200-drv590.csv"),
        "table": str(FIXTURES / "table-h200-mig-drv590.txt")}))
    return bin_dir


def test_jobs_sized_by_memory_get_mig_slices_of_their_own(
        exchange: Exchange, cluster: Cluster) -> None:
    bin_dir = mig_h200_bin(cluster.root / "h200")
    path = f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin"
    exchange.agent("h200", cpus=4, args=["--storage-mb", "5"], env={"PATH": path})
    client = exchange.client
    node = exchange.wait_for(
        lambda: next((n for n in client.nodes() if n.name == "h200"
                      and n.verification_status in ("pass", "warn")), None),
        90, "the MIG node to be verified")
    offers = client.offers(Compute(gpu_memory="16GB+"), limit=10).offers
    assert sorted((o.gpu, o.gpu_slice, o.gpu_count) for o in offers) == [
        ("h200", "16GB", 2), ("h200", "32GB", 1), ("h200", "35GB", 2)]

    release = cluster.root / "release"
    jobs = [client.submit(JobSpec(command=["python", "-c", HOLD, str(release)],
                                  compute=Compute(gpu_memory="16GB+"), max_retries=0))
            for _ in range(2)]
    for job in jobs:
        exchange.wait_running(job.id, timeout=60)
    seen = [exchange.wait_for(lambda j=job: printed(client, j.id, 1), 30, "the job's line")
            for job in jobs]
    release.touch()
    assert sorted(s[0] for s in seen) == [f"MIG-{H200}/10/0", f"MIG-{H200}/9/0"]
    for job in jobs:
        ended = exchange.wait_ended(job.id, timeout=60)
        assert ended.state == "SUCCEEDED", ended
        assert [a.node_id for a in ended.attempts] == [node.id]
