"""The whole probe and verification, driven through a fake nvidia-smi that replays real
captures (NVML is absent here, so the probe falls back to nvidia-smi as it would on a node
whose NVML library does not load)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bourse.agent.probe import ProbeOptions, probe, probe_gpus, run_probe
from bourse.core.verification import verify
from bourse.protocol.common import Check, Declared, ProbeReport, VerificationReport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
Install = Callable[..., Path]


NO_PYTHON = "/nonexistent/python"  # skips the torch subprocess where it is not the point


def probed(tmp_path: Path, declared: Declared | None = None, checks: bool = False,
           python: str = NO_PYTHON) -> tuple[ProbeReport, VerificationReport]:
    report = run_probe(ProbeOptions(work_dir=tmp_path / "work", storage_mb=4, checks=checks,
                                    cpu_budget_s=0.05, python=python))
    return report, verify(report, declared)


def check(verification: VerificationReport, name: str) -> Check:
    return next(c for c in verification.checks if c.name == name)


def test_a10g_capture_is_a_verified_a10g_with_driver_515(fake_smi: Install,
                                                          tmp_path: Path) -> None:
    fake_smi(xml="xml-a10g-drv515.xml")
    report, verification = probed(tmp_path, Declared(gpus="a10g:1"), checks=True)
    assert report.source == "nvidia-smi-xml"
    assert (report.driver, report.cuda) == ("515.105.01", "11.7")
    (gpu,) = report.gpus
    assert (gpu.model, gpu.memory_mib, gpu.uuid) == (
        "a10g", 23028, "GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94")
    assert verification.status == "warn"  # x8 link and no CUDA torch here: warnings only
    assert check(verification, "gpu0.memory").status == "pass"
    assert check(verification, "gpu0.ecc").status == "pass"
    assert check(verification, "declared.gpus").status == "pass"
    assert check(verification, "gpu0.pcie").status == "warn"
    assert "gen 1 x8" in check(verification, "gpu0.pcie").reason
    assert check(verification, "gpu0.compute").status == "warn"  # no CUDA torch here
    assert check(verification, "driver").status == "warn"
    assert verification.notes == [
        "driver 515.105.01: runs torch <= 2.0 (cu117); torch 2.1 (cu118) needs driver >= "
        "520.61.05"]
    assert verification.offers == ["gpu0: a10g, 23028 MiB"]


def test_a10_with_pending_remapped_rows_and_derived_ecc_errors_fails(
        fake_smi: Install, tmp_path: Path) -> None:
    # txt-a10-drv535.txt is real and has 4 uncorrectable remapped rows, remap pending. For the
    # failure case this test derives a copy: the same capture as -q -x is not available, so
    # the -q text is served by a derived XML built from the A10G capture with two counters
    # changed (DERIVED, not a real capture): volatile DRAM uncorrectable 0 -> 2 and
    # remapped_row_failure No -> Yes.
    text = (FIXTURES / "xml-a10g-drv515.xml").read_text()
    volatile = text.index("<volatile>")
    derived = (text[:volatile] + text[volatile:].replace(
        "<dram_uncorrectable>0</dram_uncorrectable>",
        "<dram_uncorrectable>2</dram_uncorrectable>", 1))
    derived = derived.replace("<remapped_row_failure>No</remapped_row_failure>",
                              "<remapped_row_failure>Yes</remapped_row_failure>")
    path = tmp_path / "derived-a10g-ecc-errors.xml"
    path.write_text(derived)
    fake_smi(xml=str(path))
    report, verification = probed(tmp_path)
    assert report.gpus[0].ecc_uncorrectable_volatile == 2
    assert verification.status == "fail"
    assert check(verification, "gpu0.ecc").status == "fail"
    assert "uncorrectable ECC errors (volatile 2, aggregate 0)" in check(
        verification, "gpu0.ecc").reason
    assert check(verification, "gpu0.memory_health").status == "fail"


def test_real_pending_row_remap_warns(fake_smi: Install, tmp_path: Path) -> None:
    """txt-a10-drv535.txt answers -q (this machine has no -q -x capture)."""
    fake_smi(text="txt-a10-drv535.txt")
    report, verification = probed(tmp_path)
    assert (report.source, report.gpus[0].remapped_rows_uncorrectable) == ("nvidia-smi-text", 4)
    assert check(verification, "gpu0.memory_health").status == "warn"
    assert "reset the GPU" in check(verification, "gpu0.memory_health").reason


def test_mig_table_lists_each_slice(fake_smi: Install, tmp_path: Path) -> None:
    fake_smi(table="table-h200-mig-drv590.txt")  # no -q -x or CSV capture of this state
    report, verification = probed(tmp_path)
    assert report.source == "nvidia-smi-table"
    assert len(report.gpu_errors) == 3  # -q -x, -q and --query-gpu had no answer
    assert verification.offers == [
        "gpu0 MIG GI 2 CI 0 of h200: 71424 MiB, 16 SMs",
        "gpu0 MIG GI 2 CI 1 of h200: 71424 MiB, 32 SMs",
        "gpu0 MIG GI 3 CI 0 of h200: 33280 MiB, 32 SMs",
        "gpu0 MIG GI 9 CI 0 of h200: 16384 MiB, 16 SMs",
        "gpu0 MIG GI 10 CI 0 of h200: 16384 MiB, 16 SMs",
    ]
    mig = check(verification, "gpu0.mig")  # the table names no UUID: nothing to give a job
    assert (mig.status, mig.reason.startswith("5 MIG devices have no UUID")) == ("warn", True)


# One R610 machine in one session (utkuozdemir/nvidia_gpu_exporter's capture has no -q -x).
R610 = {"text": "txt-rtx2080super-drv610.txt", "csv": "csv-rtx2080super-drv610.csv",
        "table": "table-rtx2080super-drv610.txt"}


@pytest.mark.parametrize(("forms", "source", "failed"), [
    (("text", "csv", "table"), "nvidia-smi-text", ["-q -x"]),
    (("csv", "table"), "nvidia-smi-csv", ["-q -x", "-q"]),
    (("table",), "nvidia-smi-table", ["-q -x", "-q", "--query-gpu"]),
])
def test_after_nvml_the_probe_tries_xml_then_text_then_csv_then_the_table(
        fake_smi: Install, forms: tuple[str, ...], source: str, failed: list[str]) -> None:
    fake_smi(**{form: R610[form] for form in forms})
    found = probe_gpus()
    assert found.reading.source == source
    assert [e.split(" exited with")[0] for e in found.errors] == [
        f"nvidia-smi {form}" for form in failed]
    (gpu,) = found.reading.gpus
    assert (found.reading.driver, found.reading.cuda, gpu.model, gpu.memory_mib) == (
        "610.57.04", "13.3", "rtx-2080-super", 8192)


@pytest.mark.parametrize(("captures", "partial", "says"), [
    # -q -x and -q are absent, --query-gpu reads everything
    ({"csv": "csv-rtx2080super-drv610.csv", "table": "table-rtx2080super-drv610.txt"}, False,
     "GPU facts come from nvidia-smi-csv because richer sources failed"),
    # only a -q report cut after 1 of 8 GPUs: no source reads everything, it is kept
    ({"text": "txt-h100-80gb-hbm3-truncated-drv535.txt"}, True,
     "GPU facts come from nvidia-smi-text, which did not read everything it shows"),
])
def test_the_report_says_whether_its_gpu_facts_are_partial(
        fake_smi: Install, tmp_path: Path, captures: dict[str, str], partial: bool,
        says: str) -> None:
    fake_smi(**captures)
    report, verification = probed(tmp_path)
    assert report.gpu_partial is partial
    assert check(verification, "gpu.source").reason.startswith(says)


def test_refused_xml_falls_back_to_the_text_report(fake_smi: Install, tmp_path: Path) -> None:
    from test_probe_xml_safety import BILLION_LAUGHS
    path = tmp_path / "laughs.xml"
    path.write_text(BILLION_LAUGHS)
    fake_smi(xml=str(path), text="txt-h100-mig-drv590.txt", table="table-h100-mig-drv590.txt")
    report, verification = probed(tmp_path)
    assert report.source == "nvidia-smi-text"
    assert "refused" in report.gpu_errors[0] and len(report.gpu_errors) == 1
    (gpu,) = report.gpus
    assert (gpu.model, gpu.mig_enabled, len(gpu.mig_instances)) == ("h100-80gb", True, 4)
    assert check(verification, "gpu.source").status == "warn"


def test_csv_query_completed_by_the_table(fake_smi: Install, tmp_path: Path) -> None:
    fake_smi(csv="csv-h200-drv590.csv", table="table-h200-drv590.txt")
    report, verification = probed(tmp_path)
    assert report.source == "nvidia-smi-csv"
    assert (report.driver, report.cuda) == ("590.48.01", "13.1")
    (gpu,) = report.gpus
    assert (gpu.model, gpu.compute_capability, gpu.pcie_gen_current, gpu.ecc_enabled) == (
        "h200", "9.0", 5, True)
    assert check(verification, "gpu0.pcie").status == "pass"
    assert check(verification, "driver").status == "pass"


@pytest.mark.parametrize("flood", [None, "xml"])
def test_malicious_xml_is_refused_and_reported(fake_smi: Install, tmp_path: Path,
                                               flood: str | None) -> None:
    from test_probe_xml_safety import BILLION_LAUGHS
    path = tmp_path / "laughs.xml"
    path.write_text(BILLION_LAUGHS)
    fake_smi(xml=str(path), flood=flood, flood_mb=50)
    report, verification = probed(tmp_path)
    assert report.gpus == [] and report.source == "none"
    assert "refused" in report.gpu_errors[0]
    assert check(verification, "gpu.source").status == "warn"


def test_a_hung_nvidia_smi_costs_a_bounded_time(fake_smi: Install) -> None:
    fake_smi(xml="xml-a10g-drv515.xml", hang=True)
    found = probe_gpus(timeout=0.5)
    assert found.reading.gpus == ()
    assert all("did not finish within 0.5 s" in e for e in found.errors)


def test_declared_a100_on_a_machine_without_gpu_is_rejected(tmp_path: Path) -> None:
    report, verification = probed(tmp_path, Declared(gpus="a100-80gb:8", cpus=10_000))
    assert report.gpus == []
    assert check(verification, "declared.gpus").status == "fail"
    assert check(verification, "declared.gpus").reason.startswith(
        "declared 8x a100-80gb, found none")
    assert check(verification, "declared.cpus").status == "fail"
    assert verification.status == "fail"


def test_this_machine_has_no_gpu_and_its_host_facts(tmp_path: Path) -> None:
    report, verification = probed(tmp_path, checks=True, python=sys.executable)
    assert (report.source, report.gpus, report.driver) == ("none", [], None)
    host = report.host
    assert host.cpu_logical_cores >= 1 and host.memory_mib > 0 and host.cpu_model
    assert host.python.count(".") == 2 and host.kernel
    assert host.torch is not None and host.torch.version.startswith("2.")  # the venv's torch
    assert re.fullmatch(r"[0-9a-f]{64}", report.fingerprint)
    assert report.storage is not None and report.storage.error is None
    assert [b.device for b in report.benchmarks] == ["cpu"]
    assert verification.status != "fail"
    assert 0 < report.checks_s < report.duration_s


def test_the_hello_capabilities_carry_the_new_fields(fake_smi: Install, tmp_path: Path) -> None:
    fake_smi(xml="xml-gtx1080-x2-drv460.xml")
    caps = probe(tmp_path / "work", cpus=2)
    assert caps.cpus == 2 and caps.cuda == "11.2" and caps.driver == "460.27.04"
    assert [g.model for g in caps.gpus] == ["gtx-1080", "gtx-1080"]
    assert caps.fingerprint and len(caps.fingerprint) == 64
