"""Verification is a pure function of a probe report: tables of reports and verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from bourse.core.errors import InvalidInput
from bourse.core.gpus import catalogue
from bourse.core.verification import compatibility_notes, peaks, verify, worst
from bourse.protocol.common import (
    Benchmark,
    Check,
    Declared,
    GpuInfo,
    HostInfo,
    MigInstance,
    ProbeReport,
    StorageResult,
    TorchInfo,
)

H100 = dict(model="h100-80gb", name="NVIDIA H100 80GB HBM3", memory_mib=81559, index=0)
CPU = Benchmark(device="cpu", dtype="float32", size=1024, tflops=0.2, library="numpy 2")


def report(gpus: list[dict[str, Any]] = (), driver: str | None = "570.124.04",  # type: ignore[assignment]
           **fields: Any) -> ProbeReport:
    """A report from a host that measured something (the "host" check fails empty ones)."""
    fields.setdefault("host", HostInfo(cpu_logical_cores=8, memory_mib=65536))
    fields.setdefault("fingerprint", "f" * 64)
    return ProbeReport(driver=driver, gpus=[GpuInfo(**g) for g in gpus], **fields)


def checks(r: ProbeReport, name: str, declared: Declared | None = None) -> list[Check]:
    return [c for c in verify(r, declared).checks if c.name == name]


def status(r: ProbeReport, name: str, declared: Declared | None = None) -> str | None:
    found = checks(r, name, declared)
    return found[0].status if found else None


@pytest.mark.parametrize(("driver", "expected", "reason_has"), [
    ("352.99", "fail", "predates CUDA 11.0"),
    ("470.74", "warn", "supports CUDA 11.4 (runs CUDA 11.x builds)"),
    ("515.105.01", "warn", "torch 2.14 needs driver >= 560.28.03 (cu126)"),
    ("535.129.03", "warn", "runs CUDA 11.x and 12.x builds"),
    ("570.124.04", "pass", "supports CUDA 12.8"),
    ("595.84", "pass", "runs CUDA 11.x and 12.x and 13.x builds"),
    ("banana", "warn", "cannot read driver version"),
])
def test_driver_against_cuda_family_floors(driver: str, expected: str, reason_has: str) -> None:
    (check,) = checks(report(driver=driver), "driver")
    assert check.status == expected and reason_has in check.reason


@pytest.mark.parametrize(("driver", "gpu", "note"), [
    ("515.65.01", None, "driver 515.65.01: runs torch <= 2.0 (cu117); torch 2.1 (cu118) needs "
                        "driver >= 520.61.05"),
    ("470.74", None, "driver 470.74: runs torch <= 1.12 (cu113); torch 1.13 (cu116) needs "
                     "driver >= 510.39.01"),
    ("570.124.04", None, "driver 570.124.04: runs torch <= 2.14 (cu126), the newest release "
                         "bourse knows"),
    ("535.129.03", "k80", "driver 535.129.03: runs torch <= 2.7 (cu118); torch 2.8 has no "
                          "build for k80"),
    ("352.99", None, "driver 352.99: runs no PyTorch release bourse knows (oldest: torch 1.12)"),
])
def test_compatibility_notes(driver: str, gpu: str | None, note: str) -> None:
    gpus = [GpuInfo(name="x", model=gpu)] if gpu else []
    assert compatibility_notes(driver, gpus) == [note]


GPU_CASES: list[tuple[str, dict[str, Any], str | None, str]] = [
    ("memory", H100, "pass", "matches h100-80gb"),
    ("memory", {**H100, "memory_mib": 40960}, "fail", "reports 40960 MiB but a h100-80gb"),
    ("model", {**H100, "model": None, "name": "NVIDIA Quantum Z9000"}, "warn",
     "not in bourse's GPU catalogue"),
    ("pcie", {**H100, "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 16,
              "pcie_width_max": 16}, "pass", "gen 5 x16"),
    ("pcie", {**H100, "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 8,
              "pcie_width_max": 16}, "warn", "narrow link"),
    ("pcie", {**H100, "pcie_gen_current": 1, "pcie_gen_max": 5, "pcie_width_current": 16,
              "pcie_width_max": 16}, "warn", "idle GPU drops its link generation"),
    ("pcie", H100, None, ""),
    ("ecc", {**H100, "ecc_uncorrectable_volatile": 0, "ecc_uncorrectable_aggregate": 0,
             "ecc_enabled": True}, "pass", "ECC enabled"),
    ("ecc", {**H100, "ecc_uncorrectable_volatile": 1}, "fail", "volatile 1"),
    ("ecc", {**H100, "ecc_uncorrectable_volatile": 0, "ecc_uncorrectable_aggregate": 3},
     "fail", "aggregate 3"),
    ("memory_health", {**H100, "remapped_rows_failure": True}, "fail", "no spare memory rows"),
    ("memory_health", {**H100, "remapped_rows_pending": True}, "warn", "row remapping pending"),
    ("memory_health", {**H100, "retired_pages": 60}, "fail", "60 retired memory pages"),
    ("memory_health", {**H100, "retired_pages": 2, "retired_pages_pending": True}, "warn",
     "page retirement pending"),
    ("memory_health", {**H100, "remapped_rows_failure": False, "remapped_rows_pending": False},
     "pass", "no pending"),
    ("power", {**H100, "power_limit_w": 200, "power_default_limit_w": 350}, "warn",
     "57% of the board's default 350 W"),
    ("power", {**H100, "power_limit_w": 336, "power_default_limit_w": 320}, None, ""),
    ("clocks", {**H100, "clock_event_reasons": ["sw_power_cap"]}, None, ""),
    ("clocks", {**H100, "clock_event_reasons": ["hw_slowdown", "hw_power_brake_slowdown"]},
     "warn", "hw_power_brake_slowdown, hw_slowdown"),
    ("mig", {**H100, "mig_enabled": True}, "warn", "no MIG instance exists"),
    ("mig", {**H100, "mig_enabled": False, "mig_pending": True}, "warn", "change is pending"),
    ("mig", {**H100, "uuid": "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa", "mig_enabled": True,
             "mig_pending": True, "mig_instances": [MigInstance(
                 gpu_instance_id=1, compute_instance_id=0, memory_mib=40448)]}, "pass",
     "1 instances, each offered as a GPU of its own (the whole GPU is not offered"),
    ("mig", {**H100, "mig_enabled": True, "mig_instances": [MigInstance(
        gpu_instance_id=1, compute_instance_id=0, memory_mib=40448)]}, "warn",
     "1 MIG devices have no UUID, nor has their GPU, so no job can be given them"),
]


@pytest.mark.parametrize(("check", "gpu", "expected", "reason_has"), GPU_CASES)
def test_gpu_checks(check: str, gpu: dict[str, Any], expected: str | None,
                    reason_has: str) -> None:
    found = checks(report([gpu]), f"gpu0.{check}")
    assert (found[0].status if found else None) == expected
    if found:
        assert reason_has in found[0].reason


def bench(tflops: float | None, dtype: str = "bfloat16", error: str | None = None) -> Benchmark:
    return Benchmark(device="cuda:0", dtype=dtype, size=8192, tflops=tflops, error=error)


@pytest.mark.parametrize(("gpu", "benchmarks", "torch", "expected", "reason_has"), [
    (H100, [CPU, bench(650.0)], None, "pass", "86% of a h100-80gb's dense peak"),
    (H100, [CPU, bench(300.0)], None, "fail", "40% of a h100-80gb's 756 dense peak"),
    # an L4 (121 TFLOPS bf16 dense) sold as an L40S (362): mislabelled, fails
    ({"model": "l40s", "name": "NVIDIA L40S", "index": 0}, [CPU, bench(110.0)], None, "fail",
     "is not a l40s"),
    ({**H100, "clock_event_reasons": ["hw_power_brake_slowdown"]}, [CPU, bench(200.0)], None,
     "fail", "throttled (hw_power_brake_slowdown)"),
    ({"model": "gtx-1080", "name": "GeForce GTX 1080", "index": 0}, [CPU, bench(9.0, "float16")],
     None, "pass", "no datasheet figure for gtx-1080 float16"),
    (H100, [CPU, bench(None, error="CUDA error: unknown error")], None, "fail",
     "benchmark failed"),
    (H100, [CPU], None, "warn", "torch is not installed"),
    (H100, [CPU], TorchInfo(version="2.13.0+cpu"), "warn", "is a CPU build"),
    (H100, [CPU], TorchInfo(version="2.4.0", cuda="12.4"), "warn", "sees no GPU"),
    (H100, [], None, None, ""),  # --skip-checks: nothing measured, nothing judged
    ({**H100, "mig_enabled": True}, [CPU], None, None, ""),
])
def test_compute_against_the_datasheet(gpu: dict[str, Any], benchmarks: list[Benchmark],
                                       torch: TorchInfo | None, expected: str | None,
                                       reason_has: str) -> None:
    r = report([gpu], benchmarks=benchmarks, host=HostInfo(torch=torch))
    found = checks(r, "gpu0.compute")
    assert (found[0].status if found else None) == expected
    if found:
        assert reason_has in found[0].reason


@pytest.mark.parametrize(("storage", "expected", "reason_has"), [
    (StorageResult(path="/w", size_mb=100, write_mb_s=900, read_mb_s=2000), "pass", "write 900"),
    (StorageResult(path="/w", size_mb=100, write_mb_s=60, read_mb_s=2000), "warn",
     "below 100 MB/s"),
    (StorageResult(path="/w", size_mb=100, error="/w: no space left"), "fail", "no space left"),
    (None, None, ""),
])
def test_storage(storage: StorageResult | None, expected: str | None, reason_has: str) -> None:
    found = checks(report(storage=storage), "storage")
    assert (found[0].status if found else None) == expected
    if found:
        assert reason_has in found[0].reason


A100S = [{"model": "a100-40gb", "name": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960,
          "index": i} for i in range(2)]


@pytest.mark.parametrize(("declared", "name", "expected", "reason"), [
    (Declared(gpus="a100:2"), "declared.gpus", "pass",
     "declared 2x a100 (any of a100-40gb, a100-80gb): found 2x a100-40gb"),
    (Declared(gpus="a100-80gb:2"), "declared.gpus", "fail",
     "declared 2x a100-80gb, found 2x a100-40gb"),
    (Declared(gpus="h100:8"), "declared.gpus", "fail", "declared 8x h100 (any of"),
    (Declared(cpus=64), "declared.cpus", "fail", "declared 64 CPUs, found 8"),
    (Declared(cpus=8), "declared.cpus", "pass", "declared 8 CPUs, found 8"),
    (Declared(memory_gib=24), "declared.memory", "pass", "declared 24 GiB memory, found 23.54"),
    (Declared(memory_gib=64), "declared.memory", "fail", "declared 64 GiB memory, found 23.54"),
    (Declared(disk_gib=500), "declared.disk", "fail", "declared 500 GiB free disk, found 75"),
])
def test_declared_against_measured(declared: Declared, name: str, expected: str,
                                   reason: str) -> None:
    r = report(A100S, host=HostInfo(cpu_logical_cores=8, memory_mib=24105, disk_free_gib=75))
    (check,) = checks(r, name, declared)
    assert check.status == expected and check.reason.startswith(reason)


def test_declared_gpu_on_a_machine_without_any() -> None:
    (check,) = checks(report([], driver=None), "declared.gpus", Declared(gpus="a100-80gb:8"))
    assert check.status == "fail"
    assert check.reason.startswith("declared 8x a100-80gb, found none")
    assert (check.expected, check.measured) == ("8x a100-80gb", "none")


def test_an_unknown_declared_label_is_bad_input() -> None:
    with pytest.raises(InvalidInput, match="unknown GPU"):
        verify(report(), Declared(gpus="zz9000"))


def test_overall_status_is_the_worst_check() -> None:
    assert worst([]) == "pass"
    assert worst(["pass", "warn", "pass"]) == "warn"
    assert worst(["warn", "fail", "pass"]) == "fail"
    assert verify(report([H100])).status == "pass"
    assert verify(report([{**H100, "ecc_uncorrectable_volatile": 1}])).status == "fail"


def test_offers_list_mig_slices_separately() -> None:
    migs = [MigInstance(gpu_instance_id=1, compute_instance_id=0, profile="3g.40gb",
                        memory_mib=40448, multiprocessors=60),
            MigInstance(gpu_instance_id=2, compute_instance_id=0, memory_mib=40448,
                        multiprocessors=60)]
    r = report([{**A100S[0], "mig_enabled": True, "mig_instances": migs}, A100S[1]])
    assert verify(r).offers == [
        "gpu0 MIG 3g.40gb of a100-40gb: 40448 MiB, 60 SMs",
        "gpu0 MIG GI 2 CI 0 of a100-40gb: 40448 MiB, 60 SMs",
        "gpu1: a100-40gb, 40960 MiB",
    ]


def test_source_errors_are_reported() -> None:
    (check,) = checks(report([], driver=None, gpu_errors=["nvidia-smi -q -x: unsafe XML "
                                                          "refused"]), "gpu.source")
    assert check.status == "warn" and "no GPU could be read" in check.reason


CUT_REPORT = ("nvidia-smi -q: says 8 GPUs are attached but shows 1 (the output ends early or "
              "names GPUs this probe cannot read)")


@pytest.mark.parametrize(("errors", "partial", "says"), [
    # a richer source failed, a later one read everything
    (["nvidia-smi -q -x exited with 6: Unknown Error"], False,
     "because richer sources failed or did not read everything they show"),
    # no source read everything: the first partial reading is kept
    (["nvidia-smi -q -x exited with 6: Unknown Error", CUT_REPORT,
      "nvidia-smi --query-gpu exited with 6: Unknown Error"], True,
     "which did not read everything it shows; no source did, so its partial reading is kept"),
    # the richest source itself was partial and nothing else answered: no richer source failed
    ([CUT_REPORT], True, "which did not read everything it shows"),
])
def test_the_source_warning_says_why_these_facts_were_kept(
        errors: list[str], partial: bool, says: str) -> None:
    r = report([H100], source="nvidia-smi-text", gpu_errors=errors, gpu_partial=partial)
    (check,) = checks(r, "gpu.source")
    assert check.status == "warn"
    assert check.reason.startswith("GPU facts come from nvidia-smi-text")
    assert says in check.reason and all(e in check.reason for e in errors)
    assert ("richer" in check.reason) is not partial


def test_perf_table_names_catalogue_models_and_dense_figures() -> None:
    for model, peak in peaks().items():
        assert model in catalogue().models, model
        assert peak.fp32 is not None
        assert peak.fp16 is None or peak.fp16 > peak.fp32
        assert peak.bf16 is None or peak.bf16 == peak.fp16


def test_a_report_that_measured_nothing_fails() -> None:
    assert status(ProbeReport(), "host") == "fail"
    assert status(report([]), "host") is None
