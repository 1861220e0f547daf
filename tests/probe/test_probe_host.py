"""Host facts, the storage check, the fingerprint and the command runner, on this machine."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bourse.agent.probe.commands import CommandError, run_command
from bourse.agent.probe.fingerprint import fingerprint, gpu_identity, machine_id
from bourse.agent.probe.host import (
    cpu_flags,
    cpu_model,
    find_tools,
    os_name,
    tool_version,
    torch_info,
)
from bourse.agent.probe.storage import Disk, check_storage
from bourse.protocol.common import GpuInfo

# Real outputs, captured on the development machine.
DOCKER_VERSION = "Docker version 28.2.2, build e6534b4\n"
NVCC_VERSION = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""


def test_tool_versions_from_their_real_output() -> None:
    assert tool_version("docker", DOCKER_VERSION) == "28.2.2"
    assert tool_version("nvcc", NVCC_VERSION) == "13.0.88"
    assert tool_version("podman", "") is None


# What docker 28.2.2's CLI prints for `docker version --format {{.Server.Version}}`, with its
# daemon running and without one (captured on the development machine, which has the CLI only).
FAKE_DOCKER = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Docker version 28.2.2, build e6534b4"; exit 0; fi
if [ "$1 $2 $3" = "version --format {{.Server.Version}}" ] && [ -n "$FAKE_DOCKER_DAEMON" ]; then
    echo 28.2.2; exit 0
fi
echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon \
running?" >&2
exit 1
"""


@pytest.mark.parametrize("daemon", [True, False])
def test_docker_counts_only_when_its_daemon_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, daemon: bool) -> None:
    docker = tmp_path / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # this fake docker, and no other tool
    monkeypatch.delenv("FAKE_DOCKER_DAEMON", raising=False)
    if daemon:
        monkeypatch.setenv("FAKE_DOCKER_DAEMON", "1")
    found = [(t.name, t.version) for t in find_tools()]
    assert found == ([("docker", "28.2.2")] if daemon else [])


def test_cpu_facts_from_this_machines_cpuinfo() -> None:
    text = Path("/proc/cpuinfo").read_text()
    assert cpu_model(text)
    flags = cpu_flags(text)
    assert flags == sorted(flags) and set(flags) <= set(text.split())


def test_cpuinfo_and_os_release_readers() -> None:
    cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f sse4_2 ht\n"
    assert (cpu_model(cpuinfo), cpu_flags(cpuinfo)) == ("AMD EPYC", ["avx2", "avx512f", "sse4_2"])
    assert os_name('NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n') == (
        "Debian GNU/Linux 12 (bookworm)")


def test_torch_info_reads_the_subprocess_line() -> None:
    line = '{"version": "2.13.0+cpu", "cuda": null, "cuda_available": false, "device_count": 0}'
    info = torch_info(f"warning: something\n{line}\n")
    assert info is not None and (info.version, info.cuda) == ("2.13.0+cpu", None)
    assert torch_info('{"error": "ModuleNotFoundError()"}') is None
    assert torch_info("") is None


# --- storage -------------------------------------------------------------------------------

def test_storage_check_measures_both_ways(tmp_path: Path) -> None:
    result = check_storage(tmp_path, size_mb=8)
    assert result.error is None
    assert result.write_mb_s and result.read_mb_s and result.write_mb_s > 0
    assert list(tmp_path.iterdir()) == []  # the check file is gone


def _mount(target: Path, options: str) -> bool:
    target.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only: skipped where mount is not allowed)."""
    target = tmp_path / "tiny"
    if os.geteuid() != 0 or not _mount(target, "size=1m"):
        pytest.skip("cannot mount a tmpfs here")
    yield target
    subprocess.run(["umount", str(target)], check=False)


def test_a_full_disk_fails_with_the_path(tmpfs: Path) -> None:
    result = check_storage(tmpfs, size_mb=4)
    assert result.error is not None and result.write_mb_s is None
    assert result.error.startswith(f"{tmpfs}: no space left")
    assert list(tmpfs.iterdir()) == []


def test_a_read_only_disk_fails_with_the_path(tmp_path: Path) -> None:
    target = tmp_path / "ro"
    if os.geteuid() != 0 or not _mount(target, "ro,size=1m"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        result = check_storage(target, size_mb=1)
    finally:
        subprocess.run(["umount", str(target)], check=False)
    assert result.error == (f"{target} is not writable (Read-only file system); jobs write "
                            "their files there: make it writable or give the agent another "
                            "--work-dir")


@pytest.mark.parametrize(("code", "start"), [(errno.ENOSPC, "no space left"),
                                              (errno.EROFS, "is not writable"),
                                              (errno.EIO, "storage check failed")])
def test_errors_through_the_system_call_seam(tmp_path: Path, code: int, start: str) -> None:
    """The same errors where mount is not allowed: the third write fails as the kernel would."""
    calls = []

    def write(fd: int, data: bytes) -> int:
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(code, os.strerror(code))
        return os.write(fd, data)

    result = check_storage(tmp_path, size_mb=4, disk=Disk(write=write))
    assert result.error is not None and start in result.error and str(tmp_path) in result.error
    assert list(tmp_path.iterdir()) == []


# --- fingerprint ---------------------------------------------------------------------------

GPUS = ["GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94", "GPU-cc96d6f4-7f66-e1fc-8179-a45dbd47664c"]


def test_fingerprint_is_stable_and_identity_sensitive() -> None:
    base = fingerprint(GPUS, "AMD EPYC", 24105, "abc")
    assert base == fingerprint(list(reversed(GPUS)), "AMD EPYC", 24105 - 40, "abc")
    assert base != fingerprint([GPUS[0], "GPU-new"], "AMD EPYC", 24105, "abc")
    assert base != fingerprint(GPUS, "AMD EPYC", 2 * 24105, "abc")
    assert base != fingerprint(GPUS, "AMD EPYC", 24105, "other-machine")


def test_gpus_without_uuid_are_identified_by_bus_and_name() -> None:
    gpu = GpuInfo(name="NVIDIA H200", pci_bus_id="00000000:83:00.0", index=0)
    assert gpu_identity(gpu) == "00000000:83:00.0:NVIDIA H200"


def test_machine_id_reads_the_first_present_file(tmp_path: Path) -> None:
    (tmp_path / "b").write_text("  1234abcd\n")
    assert machine_id([tmp_path / "a", tmp_path / "b"]) == "1234abcd"
    assert machine_id([tmp_path / "a"]) is None


def test_same_machine_same_fingerprint_across_runs(tmp_path: Path) -> None:
    from bourse.agent.probe import probe
    assert probe(tmp_path).fingerprint == probe(tmp_path).fingerprint


# --- commands ------------------------------------------------------------------------------

def test_command_output_and_exit_code() -> None:
    out = run_command([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"])
    assert (out.returncode, out.stdout) == (3, "hi\n")


def test_command_limits() -> None:
    with pytest.raises(CommandError, match=r"did not finish within 0\.3 s"):
        run_command([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.3)
    with pytest.raises(CommandError, match="printed more than 1000 bytes"):
        run_command([sys.executable, "-c", "print('x' * 100000)"], limit=1000)
    with pytest.raises(CommandError, match="cannot run it"):
        run_command(["/nonexistent/nvidia-smi"])
