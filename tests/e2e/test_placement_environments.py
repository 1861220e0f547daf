"""Environments checked before placement, end to end: a real coordinator and real agents, two
of them with a fake ``nvidia-smi`` first on PATH replaying real captures (an RTX A5000 pair on
driver 590, a GT 1030 on driver 470), one declaring an A100 on a machine with none.

The fake GPUs cannot run the compute benchmark (torch here is a CPU build): verification
says so with a warning ("not measured") and the nodes are placeable, as a real node with a
CPU torch would be. Packages come from this machine's offline mirror (file:// indexes only,
UV_OFFLINE=1): nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import Cluster, Exchange

from bourse.core.compute import Compute
from bourse.protocol.api import NodeView
from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "nvidia-smi"
FAKE_SMI = HERE.parent / "probe" / "fake_nvidia_smi.py"
WHEELS = Path("/opt/wheels")


def fake_gpu_bin(root: Path, capture: str) -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\n{FAKE_SMI.read_text()}")
    script.chmod(0o755)
    (bin_dir / "capture.json").write_text(json.dumps({"xml": str(FIXTURES / capture)}))
    return bin_dir


def torch_mirror(root: Path) -> str:
    """A PyTorch-style index with only the CPU wheel on disk (no CUDA builds offline)."""
    wheel = next(WHEELS.glob("torch-*.whl"))
    page = root / "cpu" / "torch"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>\n')
    return root.as_uri()


def start_agents(exchange: Exchange, cluster: Cluster) -> dict[str, NodeView]:
    base = ["--storage-mb", "5", "--index-url", Path("/opt/pypi/simple").as_uri(),
            "--find-links", str(WHEELS), "--torch-index", torch_mirror(cluster.root / "torch")]
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    agents = {}
    for name, capture in (("a5000", "xml-rtx-a5000-x2-drv590.xml"),
                          ("gt1030", "xml-gt1030-drv470.xml")):
        bin_dir = fake_gpu_bin(cluster.root / f"{name}-gpu", capture)
        agents[name] = exchange.agent(name, args=base, env={
            "PATH": f"{bin_dir}:{path}", "UV_OFFLINE": "1"})
    agents["claims-a100"] = exchange.agent("claims-a100", args=[*base, "--declare-gpus", "a100"],
                                           env={"PATH": path, "UV_OFFLINE": "1"})

    def judged() -> dict[str, NodeView] | None:
        nodes = {n.name: n for n in exchange.client.nodes()}
        done = all(nodes.get(a) and nodes[a].verification_status != "unverified"
                   for a in agents)
        return {a: exchange.client.node(nodes[a].id) for a in agents} if done else None

    return exchange.wait_for(judged, 90, "the three nodes to be verified")


def offers_cli(exchange: Exchange, *flags: str) -> subprocess.CompletedProcess[str]:
    """``bourse offers --exchange`` against the test's coordinator."""
    env = {**os.environ, "BOURSE_URL": exchange.coordinator.url,
           "BOURSE_TOKEN": exchange.coordinator.token}
    return subprocess.run([sys.executable, "-m", "bourse", "offers", "--exchange", *flags],
                          env=env, capture_output=True, text=True, timeout=60, check=False)


def test_environments_are_checked_against_verified_drivers_before_placement(
        exchange: Exchange, cluster: Cluster) -> None:
    nodes = start_agents(exchange, cluster)
    a5000, gt1030, claims = nodes["a5000"], nodes["gt1030"], nodes["claims-a100"]
    # verified, GPUs recognised from the captures; the compute check could not run on them
    for node, model, driver in ((a5000, "rtx-a5000", "590.44.01"), (gt1030, "gt-1030", "470.74")):
        assert node.verification_status == "warn", node.verification
        assert node.report is not None and node.verification is not None
        assert {g.model for g in node.report.gpus} == {model}
        assert node.report.driver == driver
        compute = next(c for c in node.verification.checks if c.name.endswith(".compute"))
        assert compute.status == "warn" and compute.reason.startswith("not measured")
    # a provider's claim the probe does not confirm is rejected, with what was measured
    assert claims.verification_status == "fail"
    assert claims.verification is not None
    declared = next(c for c in claims.verification.checks if c.name == "declared.gpus")
    assert (declared.status, declared.reason.startswith("declared 1x a100")) == ("fail", True)
    assert "found none" in declared.reason

    client, torch21 = exchange.client, Compute(gpus=1, torch="2.1")
    offers = client.offers(torch21, explain=True)
    assert [o.node_id for o in offers.offers] == [a5000.id]
    assert any("driver 470.74 is too old for torch 2.1" in line
               for line in offers.explanation or []), offers.explanation
    # the same from the command line, with when the node was verified
    shown = offers_cli(exchange, "--gpus", "1", "--torch", "2.1", "--explain")
    assert shown.returncode == 0, shown.stderr
    header, row = shown.stdout.splitlines()[:2]
    assert header.split()[:4] == ["OFFER", "PROVIDER", "NODE", "GPU"], header
    assert row.split()[2:5] == ["a5000", "rtx-a5000", "2"], row
    assert a5000.verified_at is not None
    assert row.endswith(time.strftime("%Y-%m-%d %H:%M", time.localtime(a5000.verified_at)))
    assert "driver 470.74 is too old for torch 2.1" in shown.stdout

    # a torch 2.1 job lands on the driver-590 node, never on the 470 one, and says why
    job = client.submit(JobSpec(command=["python", "-c", "import torch"], compute=torch21,
                                max_retries=0))
    ended = exchange.wait_ended(job.id, timeout=120)
    assert [a.node_id for a in ended.attempts] == [a5000.id]
    placement = ended.attempts[0].placement or ""
    assert "gt1030: driver 470.74 is too old for torch 2.1: needs driver >= 520.61.05" in \
        placement, placement
    # torch 2.1 for driver 590 comes from the cu118 index, which this offline machine lacks:
    # the start fails with uv's words, before anything runs
    events = client.events(job.id)
    indexes = [e.data.get("torch_index") for e in events if e.data.get("step") == "environment"]
    assert ended.state == "FAILED" and "torch==2.1" in (ended.reason or ""), ended
    assert "uv pip compile failed" in (ended.reason or "")
    assert any(e.data.get("text") == "environment: resolving 1 package" for e in events)
    assert indexes == [None], "no ready event is expected after a failed resolve"

    # a packages job runs in its virtualenv on whichever node
    check = ("import os, sys, six; assert sys.prefix == os.environ['VIRTUAL_ENV'], sys.prefix;"
             " print(six.__version__)")
    ok = client.submit(JobSpec(command=["python", "-c", check],
                               compute=Compute(packages=["six==1.17.0"])))
    done = exchange.wait_ended(ok.id, timeout=120)
    assert done.state == "SUCCEEDED", done
    texts = [e.data.get("text", "") for e in client.events(ok.id)]
    assert any(t.startswith("environment: ready in ") and "(built, 1 packages)" in t
               for t in texts), texts

    # an image job fails at once: no node has a container engine, and the reason says so
    image = client.submit(JobSpec(command=["true"], compute=Compute(image="python:3.12")))
    failed = exchange.wait_ended(image.id, timeout=30)
    assert failed.state == "FAILED" and not failed.attempts
    assert (failed.reason or "").startswith("no node on this exchange can ever run it")
    assert "no container engine (docker or podman) to run image python:3.12" in (
        failed.reason or "")
