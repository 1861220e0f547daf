"""The agent's sampler over real processes and directories; GPUs through NVML's calls answered
from real captures (``fake_nvml``). NVML itself does not load here, so its absence is real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_nvml import ReplayNvml

from bourse.agent.metrics import GpuMeter, LiveAttempt, NoGpus, NvmlGpus, Sampler, open_gpu_meter
from bourse.agent.metrics.processes import ProcReading, cpu_percent
from bourse.agent.metrics.sampler import disks, tree_size
from bourse.agent.probe.nvml import load_pynvml

BUSY = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"
# a parent that sleeps and a child that computes: the tree's CPU is the child's
TREE = ("import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {BUSY!r}])\ntime.sleep(60)\n")


@pytest.fixture
def spawn() -> Iterator[Callable[[str], int]]:
    started: list[subprocess.Popen[bytes]] = []

    def run(script: str) -> int:
        proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
        started.append(proc)
        return proc.pid

    yield run
    for proc in started:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _sampler(tmp_path: Path, gpus: GpuMeter | None = None) -> Sampler:
    return Sampler(tmp_path, tmp_path / "cache", gpus or NoGpus(), cache_used=lambda: 1234)


def _attempt(tmp_path: Path, pid: int, job: str = "j1") -> LiveAttempt:
    root = tmp_path / "jobs" / job / "1"
    root.mkdir(parents=True, exist_ok=True)
    return LiveAttempt(job, 1, pid, root)


def test_a_computing_tree_uses_cpu_and_a_sleeping_one_does_not(
        tmp_path: Path, spawn: Callable[[str], int]) -> None:
    busy = _attempt(tmp_path, spawn(TREE), "busy")
    idle = _attempt(tmp_path, spawn("import time; time.sleep(60)"), "idle")
    sampler = _sampler(tmp_path)
    sampler.sample([busy, idle])
    time.sleep(1.0)
    found = {j.job_id: j for j in sampler.sample([busy, idle]).jobs}
    assert found["busy"].processes == 2  # the parent and its child, in the job's group
    # a whole core when the machine is idle; shared with other work on a loaded CI machine
    assert found["busy"].cpu_percent is not None and found["busy"].cpu_percent > 10
    assert found["idle"].processes == 1
    assert found["idle"].cpu_percent is not None and found["idle"].cpu_percent < 5
    assert found["idle"].memory_bytes is not None and found["idle"].memory_bytes > 1 << 20


def test_the_node_sample_has_the_machine_cache_and_disks(tmp_path: Path) -> None:
    metrics = _sampler(tmp_path).sample([])
    node = metrics.node
    assert node is not None and metrics.jobs == []
    assert node.memory_total_bytes and 0 < (node.memory_bytes or 0) <= node.memory_total_bytes
    assert node.cache_bytes == 1234 and node.gpus == []
    (disk,) = node.disks  # the cache dir does not exist yet: its filesystem is the work dir's
    assert disk.label == "work dir and cache" and 0 < disk.used_bytes <= disk.total_bytes


def test_cpu_share_between_readings() -> None:
    first = [ProcReading((10, 100.0), 2.0, 0), ProcReading((11, 100.0), 1.0, 0)]
    assert cpu_percent(None, None, first, 104.0) == pytest.approx(75.0)  # 3 s over 4 s
    later = [ProcReading((10, 100.0), 4.0, 0), ProcReading((12, 103.5), 0.5, 0)]
    previous = {r.key: r.cpu_s for r in first}
    assert cpu_percent(previous, 104.0, later, 106.0) == pytest.approx(125.0)  # 2.5 s / 2 s
    reused = [ProcReading((10, 105.0), 0.2, 0)]  # pid 10 again, a new process
    assert cpu_percent(previous, 104.0, reused, 106.0) == pytest.approx(10.0)


def test_tree_size_counts_blocks_once_per_inode(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "data").write_bytes(b"x" * 100_000)
    os.link(tmp_path / "a" / "data", tmp_path / "linked")
    (tmp_path / "link").symlink_to("/usr")
    size = tree_size(tmp_path)
    assert size is not None and 100_000 <= size < 200_000
    assert tree_size(tmp_path / "gone") is None


def test_disks_are_grouped_by_filesystem(tmp_path: Path) -> None:
    labels = [d.label for d in disks({"work dir": tmp_path, "cache": tmp_path / "c",
                                      "proc": Path("/proc")})]
    assert "work dir and cache" in labels and len(labels) == 2


def test_without_the_nvidia_driver_there_are_no_gpu_metrics() -> None:
    assert load_pynvml() is not None  # nvidia-ml-py is installed; the library is not
    assert isinstance(open_gpu_meter(), NoGpus)


def test_nvml_readings_replay_a_capture_and_name_their_processes() -> None:
    nvml = ReplayNvml("xml-gtx1080-x2-drv460.xml")
    meter = open_gpu_meter(nvml)
    assert isinstance(meter, NvmlGpus) and nvml.initialised
    first, second = meter.read()
    assert first.sample.model_dump() == {
        "index": 0, "uuid": "GPU-683c6e09-3969-31a5-b7ca-cc88252b7fce",
        "utilization_percent": 100.0, "memory_used_mib": 2900.0, "memory_total_mib": 8116.0,
        "power_w": 211.86, "temperature_c": 67.0}
    assert first.pids == second.pids == {450, 8991}
    meter.close()
    assert not nvml.initialised


def test_a_job_gets_the_gpus_its_processes_hold(tmp_path: Path,
                                                spawn: Callable[[str], int]) -> None:
    llama = _attempt(tmp_path, spawn("import time; time.sleep(60)"), "llama")
    other = _attempt(tmp_path, spawn("import time; time.sleep(60)"), "other")
    nvml = ReplayNvml("xml-rtx-a5000-x2-drv590.xml", pids={100477: llama.pid})
    found = {j.job_id: j for j in _sampler(tmp_path, NvmlGpus(nvml)).sample([llama, other]).jobs}
    assert [g.index for g in found["llama"].gpus] == [0, 1]
    assert [g.utilization_percent for g in found["llama"].gpus] == [0.0, 0.0]
    assert found["other"].gpus == []


def test_a_query_the_board_does_not_support_is_left_out() -> None:
    nvml = ReplayNvml("xml-a10g-drv515.xml", missing=("power", "temperature"))
    (gpu,) = NvmlGpus(nvml).read()
    assert (gpu.sample.power_w, gpu.sample.temperature_c) == (None, None)
    assert gpu.sample.utilization_percent == 0.0 and gpu.pids == {725}


def test_a_gpu_lost_mid_read_gives_no_gpus() -> None:
    nvml = ReplayNvml("xml-a10g-drv515.xml")

    def lost() -> int:
        raise nvml.NVMLError("GPU is lost")

    nvml.nvmlDeviceGetCount = lost  # type: ignore[method-assign]
    assert NvmlGpus(nvml).read() == []


def test_a_container_job_s_tree_is_not_reported_as_its_use(
        tmp_path: Path, spawn: Callable[[str], int]) -> None:
    """The shim's tree of a container job is the engine's client: no CPU, memory or process
    count is claimed for the container (so no CPU-based stall verdict either)."""
    client = _attempt(tmp_path, spawn(BUSY), "boxed")
    boxed = LiveAttempt(client.job_id, 1, client.pid, client.root, container=True)
    (sample,) = _sampler(tmp_path).sample([boxed]).jobs
    assert (sample.cpu_percent, sample.memory_bytes, sample.processes) == (None, None, None)
    assert sample.work_bytes is not None


def test_a_job_holds_the_gpus_it_was_given_even_unseen(
        tmp_path: Path, spawn: Callable[[str], int]) -> None:
    """A container job's processes are the engine's, invisible to the agent: the GPU the
    exchange gave it is what it holds. A job given GPU 1 whose processes hold none yet still
    reports GPU 1, and not GPU 0."""
    nvml = ReplayNvml("xml-rtx-a5000-x2-drv590.xml")
    uuids = [g.sample.uuid for g in NvmlGpus(nvml).read()]
    client = _attempt(tmp_path, spawn("import time; time.sleep(60)"), "boxed")
    boxed = LiveAttempt(client.job_id, 1, client.pid, client.root, container=True,
                        gpus=(str(uuids[1]),))
    (sample,) = _sampler(tmp_path, NvmlGpus(nvml)).sample([boxed]).jobs
    assert [g.uuid for g in sample.gpus] == [uuids[1]]
