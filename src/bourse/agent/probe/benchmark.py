"""Compute benchmarks: numpy matmul GFLOP/s on the CPU, torch matmul TFLOP/s per CUDA GPU.

The CPU figure is recorded, not judged. The GPU figure is what verification compares with the
model's datasheet peak (``bourse/data/gpu_perf.csv``): it runs in the node's Python (the one
jobs use), in a subprocess with a timeout, and only when that Python's torch sees CUDA.
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` makes ``cuda:N`` the GPU that nvidia-smi calls N.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import numpy as np

from bourse.agent.probe.commands import CommandError, run_command
from bourse.protocol.common import Benchmark

CPU_SIZE = 1024
GPU_SIZE = 8192
GPU_TIMEOUT_S = 180.0
# bf16 where the GPU has it (Ampere and newer), else fp16; 2 * n**3 flops per matmul, best of
# a few timed batches after a warm-up, so clocks have ramped and cuBLAS has picked its kernel.
_GPU_SCRIPT = """
import json, sys, time
import torch
n = int(sys.argv[1])
for i in range(torch.cuda.device_count()):
    dev = torch.device("cuda", i)
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    try:
        with torch.cuda.device(dev):
            a = torch.randn(n, n, device=dev, dtype=dtype)
            b = torch.randn(n, n, device=dev, dtype=dtype)
            for _ in range(3):
                a @ b
            torch.cuda.synchronize()
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(10):
                    a @ b
                torch.cuda.synchronize()
                best = min(best, (time.perf_counter() - start) / 10)
        print(json.dumps({"device": f"cuda:{i}", "name": torch.cuda.get_device_name(dev),
                          "dtype": str(dtype).removeprefix("torch."), "size": n,
                          "tflops": 2 * n**3 / best / 1e12, "seconds": best,
                          "library": "torch " + torch.__version__}))
    except Exception as exc:
        print(json.dumps({"device": f"cuda:{i}", "dtype": str(dtype).removeprefix("torch."),
                          "size": n, "error": repr(exc)}))
"""


def cpu_matmul(budget_s: float = 1.0, size: int = CPU_SIZE,
               clock: Callable[[], float] = time.perf_counter) -> Benchmark:
    """float32 matmul on the CPU: the best rate over about ``budget_s`` seconds."""
    rng = np.random.default_rng(0)
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    a @ b  # warm-up: threads started, BLAS buffers allocated
    best, deadline = float("inf"), clock() + budget_s
    while clock() < deadline or best == float("inf"):
        start = clock()
        a @ b
        best = min(best, clock() - start)
    return Benchmark(device="cpu", dtype="float32", size=size, seconds=round(best, 6),
                     tflops=round(2 * size**3 / max(best, 1e-9) / 1e12, 4),
                     library=f"numpy {np.__version__}")


def gpu_matmul(python: str, size: int = GPU_SIZE) -> list[Benchmark]:
    """torch matmul on every CUDA GPU ``python`` sees; an error is reported, not raised."""
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    try:
        out = run_command([python, "-c", _GPU_SCRIPT, str(size)], timeout=GPU_TIMEOUT_S, env=env)
    except CommandError as exc:
        return [Benchmark(device="cuda", dtype="", size=size, error=str(exc))]
    results = parse_gpu_output(out.stdout)
    if out.returncode != 0 and not results:
        said = (out.stderr.strip() or "no output").splitlines()[-1][:300]
        return [Benchmark(device="cuda", dtype="", size=size, error=said)]
    return results


def parse_gpu_output(stdout: str) -> list[Benchmark]:
    found = []
    for line in stdout.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "device" in data:
            found.append(Benchmark(**data))
    return found
