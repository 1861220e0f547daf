"""What the host is: CPU, memory, disk, OS, Python, container engines, CUDA toolkit, torch.

The readers of ``/proc/cpuinfo``, ``/etc/os-release`` and the tools' version output are
pure functions of their text; the shell around them runs each command with a timeout, and a
program that is missing (or fails) is simply absent from the report.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import sys
from pathlib import Path

import psutil

from bourse.agent.probe.commands import CommandError, run_command, which
from bourse.core.constraints import CONTAINER_TOOLS
from bourse.protocol.common import HostInfo, Tool, TorchInfo

# CPU features a job's wheels or kernels may require (x86 and Arm spellings).
CPU_FLAGS = frozenset({
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "aes", "sha_ni",
    "asimd", "sve", "sve2", "bf16", "i8mm",
})
# (name, argv): the engines a container runtime could use, and the CUDA compiler. A tool counts
# only when its command succeeds: docker's asks the daemon (a CLI whose daemon does not answer
# cannot run a container, and `docker --version` succeeds without one), so its version is the
# engine's.
TOOLS = (
    ("docker", ("docker", "version", "--format", "{{.Server.Version}}")),
    ("podman", ("podman", "--version")),
    ("nvidia-container-cli", ("nvidia-container-cli", "--version")),
    ("nvcc", ("nvcc", "--version")),
)
TOOL_TIMEOUT_S = 10.0
TORCH_TIMEOUT_S = 90.0  # importing torch reads a few hundred MB from disk the first time
_TORCH_SCRIPT = """
import json
try:
    import torch
except Exception as exc:
    print(json.dumps({"error": repr(exc)}))
else:
    available = bool(torch.cuda.is_available())
    print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda,
                      "cuda_available": available,
                      "device_count": torch.cuda.device_count() if available else 0}))
"""
# Without a GPU there is no CUDA to initialise: read torch's version file instead of importing
# it (milliseconds instead of seconds).
_TORCH_FILE_SCRIPT = """
import ast, importlib.util, json, pathlib
spec = importlib.util.find_spec("torch")
if spec is None or spec.origin is None:
    print(json.dumps({"error": "torch is not installed"}))
else:
    values = {}
    tree = ast.parse((pathlib.Path(spec.origin).parent / "version.py").read_text())
    for node in tree.body:
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
            values[target.id] = node.value.value
    print(json.dumps({"version": values.get("__version__"), "cuda": values.get("cuda"),
                      "cuda_available": False, "device_count": 0}))
"""
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)*")
_NVCC = re.compile(r"release \d+\.\d+, V(\d+\.\d+(?:\.\d+)*)")


def cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
            return value.strip()
    return ""


def cpu_flags(cpuinfo: str) -> list[str]:
    """The placement-relevant CPU flags of the first processor in ``/proc/cpuinfo``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return sorted(CPU_FLAGS & set(value.split()))
    return []


def os_name(os_release: str) -> str:
    """``PRETTY_NAME`` from ``/etc/os-release``."""
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return value.strip().strip('"')
    return ""


def tool_version(name: str, output: str) -> str | None:
    """The version a ``--version`` output announces (``nvcc``: its ``V12.2.140``)."""
    if name == "nvcc":
        match = _NVCC.search(output)
        return match.group(1) if match else None
    match = _VERSION.search(output)
    return match.group(0) if match else None


def torch_info(output: str) -> TorchInfo | None:
    """The torch subprocess's JSON line; None when torch is absent or broken."""
    try:
        data = json.loads(output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return None if not isinstance(data, dict) or "version" not in data else TorchInfo(**data)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def free_gib(path: Path) -> float:
    """Free space on the file system of ``path``, or of its nearest existing parent."""
    for candidate in (path, *path.parents):
        try:
            return round(shutil.disk_usage(candidate).free / 2**30, 2)
        except OSError:
            continue
    return 0.0


def engines_on_path() -> list[str]:
    """The container tools on PATH, by name only (fast: for the hello)."""
    return [name for name in CONTAINER_TOOLS if which(name) is not None]


def find_tools() -> list[Tool]:
    found = []
    for name, argv in TOOLS:
        path = which(argv[0])
        if path is None:
            continue
        try:
            out = run_command([path, *argv[1:]], timeout=TOOL_TIMEOUT_S)
        except CommandError:
            continue
        if out.returncode != 0:
            continue
        found.append(Tool(name=name, path=path, version=tool_version(name, out.stdout)))
    return found


def find_torch(python: str, import_torch: bool = True) -> TorchInfo | None:
    """torch and its CUDA in ``python`` (the interpreter jobs run with), in a subprocess.

    ``import_torch`` False reads the installed version without importing it (no GPU to ask
    about): the CUDA build is still known, ``cuda_available`` is then False."""
    script = _TORCH_SCRIPT if import_torch else _TORCH_FILE_SCRIPT
    try:
        out = run_command([python, "-c", script], timeout=TORCH_TIMEOUT_S)
    except CommandError:
        return None
    return torch_info(out.stdout) if out.returncode == 0 else None


def host_info(work_dir: Path, *, python: str | None = None, deep: bool = True,
              gpus: bool = True) -> HostInfo:
    """The host's facts; ``deep`` adds the tools and torch (seconds when torch must be
    imported to ask CUDA about the ``gpus``; milliseconds without them)."""
    cpuinfo = _read("/proc/cpuinfo")
    return HostInfo(
        hostname=socket.gethostname(),
        cpu_model=cpu_model(cpuinfo) or platform.processor() or platform.machine(),
        cpu_physical_cores=psutil.cpu_count(logical=False),
        cpu_logical_cores=os.cpu_count() or 1, cpu_flags=cpu_flags(cpuinfo),
        memory_mib=psutil.virtual_memory().total // 2**20,
        disk_free_gib=free_gib(work_dir),
        work_dir=str(work_dir), os=os_name(_read("/etc/os-release")) or platform.platform(),
        kernel=platform.release(), arch=platform.machine(), python=sys.version.split()[0],
        tools=find_tools() if deep else [],
        torch=find_torch(python or sys.executable, import_torch=gpus) if deep else None,
    )
