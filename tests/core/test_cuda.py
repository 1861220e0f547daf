"""CUDA / driver / PyTorch compatibility: ``can_run``, ``max_cuda`` and the CUDA floor syntax."""

from __future__ import annotations

import csv
import re
from importlib import resources
from pathlib import Path

import pytest

from bourse.core.cuda import can_run, max_cuda, min_driver, parse_cuda_floor, torch_release
from bourse.core.errors import InvalidInput
from bourse.core.versions import Version

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
DATA = resources.files("bourse").joinpath("data")


def v(text: str) -> Version:
    return Version.parse(text)


# --- can_run -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("driver", "gpu", "env", "build", "reason_has"),
    [
        ("515.65.01", "a10g", {"torch": "2.0.1"}, "cu117", ["515.43.04"]),
        ("515.65.01", None, {"torch": "2.0.1"}, "cu117", ["515.43.04"]),
        ("515.65.01", None, {"torch": "2.0"}, "cu117", ["515.43.04"]),
        (None, "v100-16gb", {"torch": "2.13"}, "cu126", []),
        ("590.48.01", "v100-16gb", {"torch": "2.13"}, "cu126", []),
        ("590.48.01", "h100-80gb", {"torch": "2.13"}, "cu130", ["580.65.06"]),
        ("575.57.08", "h100-80gb", {"torch": "2.13"}, "cu126", ["560.28.03"]),
        ("520.61.05", "a100-40gb", {"torch": "2.1"}, "cu118", ["520.61.05"]),
        ("590.48.01", "h100-80gb", {"torch": "2.1", "cuda": ">=12.1"}, "cu121", []),
        ("535.104.05", "h100-80gb", {"cuda": "12.2"}, "cu122", ["535.54.03"]),
        ("470.82.01", "a100-40gb", {"cuda": "11.4"}, "cu114", []),
        (None, "k80", {"cuda": "11.8"}, "cu118", []),
        (None, "t4", {"cuda": ">=13.0"}, "cu130", []),
    ],
)
def test_can_run_yes(driver: str | None, gpu: str | None, env: dict[str, str], build: str,
                     reason_has: list[str]) -> None:
    verdict = can_run(driver, gpu, **env)
    assert verdict.ok, verdict.reason
    assert verdict.build == build
    for text in reason_has:
        assert text in verdict.reason
    assert str(verdict).startswith("yes: ")


def test_old_driver_cannot_run_torch_2_1() -> None:
    verdict = can_run("470.82.01", "a100-40gb", torch="2.1")
    assert not verdict.ok
    assert verdict.build is None
    assert "520.61.05 (cu118)" in verdict.reason
    assert verdict.alternative == "torch <= 1.12 (cu113)"
    assert "torch <= 1.12 (cu113)" in str(verdict)
    assert any("minor-version" in note for note in verdict.notes)


@pytest.mark.parametrize("driver", [None, "580.65.06", "590.48.01"])
def test_v100_cannot_run_cuda_13(driver: str | None) -> None:
    verdict = can_run(driver, "v100-16gb", cuda=">=13.0")
    assert not verdict.ok
    assert "v100-16gb" in verdict.reason
    assert "compute capability" in verdict.reason


@pytest.mark.parametrize(
    ("gpu", "torch", "cuda"),
    [("mi300x", "2.1", None), ("mi300x", None, "12.1"), ("mi25", "2.13", None)],
)
def test_amd_gpus_cannot_run_cuda(gpu: str, torch: str | None, cuda: str | None) -> None:
    verdict = can_run(None, gpu, torch=torch, cuda=cuda)
    assert not verdict.ok
    assert "AMD" in verdict.reason


@pytest.mark.parametrize(
    ("driver", "gpu", "env", "reason_has", "alternative"),
    [
        ("535.104.05", "h100-80gb", {"cuda": "12.3"}, ["545.23.06", "CUDA 12.2"], None),
        ("418.56", "quadro-p2000", {"torch": "1.12"}, ["465.19.01"], None),
        ("590.48.01", "h100-80gb", {"torch": "2.1", "cuda": ">=12.4"}, ["no build"], None),
        (None, "grid-k520", {"torch": "1.12"}, ["compute capability"], None),
        ("510.47.03", "a100-40gb", {"torch": "2.0"}, ["515.43.04 (cu117)"],
         "torch <= 1.13 (cu116)"),
    ],
)
def test_can_run_no(driver: str | None, gpu: str | None, env: dict[str, str],
                    reason_has: list[str], alternative: str | None) -> None:
    verdict = can_run(driver, gpu, **env)
    assert not verdict.ok
    for text in reason_has:
        assert text in verdict.reason
    assert verdict.alternative == alternative


@pytest.mark.parametrize(
    ("driver", "torch", "cuda", "ok", "build"),
    [
        ("470.82.01", "2.1", None, True, "cu118"),
        ("450.80.02", "2.1", None, True, "cu118"),
        ("440.33.01", "2.1", None, False, None),  # below the CUDA 11 minor-version floor
        ("525.60.13", None, "12.4", True, "cu124"),
        ("525.60.13", "2.5", ">=12.4", True, "cu124"),
        ("520.61.05", None, "12.0", False, None),  # below the CUDA 12 floor
    ],
)
def test_minor_version_compatibility_when_asked(driver: str, torch: str | None,
                                                cuda: str | None, ok: bool,
                                                build: str | None) -> None:
    verdict = can_run(driver, "a100-40gb", torch=torch, cuda=cuda, minor_compat=True)
    assert verdict.ok is ok
    assert verdict.build == build
    if ok and torch is not None:
        assert can_run(driver, "a100-40gb", torch=torch, cuda=cuda).ok is False


def test_no_requirement_always_runs() -> None:
    assert can_run("418.56", "quadro-p2000").ok


@pytest.mark.parametrize("torch", ["9.9", "2.99", "3.0", "0.4"])
def test_unknown_torch_release(torch: str) -> None:
    with pytest.raises(InvalidInput) as info:
        can_run(None, "a100-40gb", torch=torch)
    assert info.value.field == "torch"
    with pytest.raises(InvalidInput):
        torch_release(torch)


@pytest.mark.parametrize(
    ("text", "builds"),
    [("2.1", ["11.8", "12.1"]), ("2.1.0", ["11.8", "12.1"]), ("2.13.0+cu126", ["13.0", "12.6",
                                                                               "13.2"])],
)
def test_torch_release_lookup(text: str, builds: list[str]) -> None:
    assert [str(b) for b in torch_release(text).builds] == builds


# --- max_cuda ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("470.74", "11.4"),
        ("590.48.01", "13.1"),
        ("535.104.05", "12.2"),
        ("418.56", None),
        ("450.51.05", "11.0"),
        ("450.51.04", None),
        ("525.60.13", "12.0"),
        ("520.61.05", "11.8"),
        ("610.43.02", "13.3"),
        ("999.1", "13.3"),
    ],
)
def test_max_cuda(driver: str, cuda: str | None) -> None:
    result = max_cuda(v(driver))
    assert (None if result is None else str(result)) == cuda


# (driver, "CUDA Version") that nvidia-smi printed in the Linux captures
SMI_REPORTS = {
    "xml-a10g-drv515.xml": ("515.105.01", "11.7"),
    "xml-gt1030-drv470.xml": ("470.74", "11.4"),
    "xml-gtx1080-x2-drv460.xml": ("460.27.04", "11.2"),
    "xml-quadro-p2000-drv418.xml": ("418.56", "10.1"),
    "xml-quadro-p2200-drv450.xml": ("450.80.02", "11.0"),
    "xml-rtx-a5000-x2-drv590.xml": ("590.44.01", "13.1"),
    "xml-rtx3060-drv570.xml": ("570.124.04", "12.8"),
    "xml-rtx3090-drv525.xml": ("525.147.05", "12.0"),
    "xml-rtx4000-sff-ada-drv595.xml": ("595.84", "13.2"),
    "txt-a10-drv535.txt": ("535.129.03", "12.2"),
    "txt-h100-80gb-hbm3-x8-drv535.txt": ("535.161.08", "12.2"),
    "txt-l40s-drv595.txt": ("595.80", "13.2"),
    "txt-rtx2080ti-x4-drv545.txt": ("545.23.08", "12.3"),
    "txt-rtx4090-x8-drv535.txt": ("535.154.05", "12.2"),
    "table-h200-drv590.txt": ("590.48.01", "13.1"),
    "table-h200-mig-drv590.txt": ("590.48.01", "13.1"),
    "table-l40s-drv595.txt": ("595.80", "13.2"),
}
_DRIVER = re.compile(r"(?:<driver_version>|Driver Version\s*:?\s*)([0-9.]+)")
_CUDA = re.compile(r"(?:<cuda_version>|CUDA Version\s*:?\s*)([0-9.]+)")


@pytest.mark.parametrize(("file", "report"), sorted(SMI_REPORTS.items()))
def test_max_cuda_agrees_with_nvidia_smi(file: str, report: tuple[str, str]) -> None:
    driver, cuda = report
    text = (FIXTURES / file).read_text(encoding="utf-8")
    assert [m.group(1) for m in (_DRIVER.search(text), _CUDA.search(text)) if m] == [driver, cuda]
    expected = None if v(cuda) < v("11.0") else cuda  # the table starts at CUDA 11.0
    result = max_cuda(v(driver))
    assert (None if result is None else str(result)) == expected


# --- the driver table, row by row --------------------------------------------------------------

def _driver_rows() -> list[dict[str, str]]:
    with DATA.joinpath("cuda_driver_min.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


GA_ROWS = sorted(((r["cuda_toolkit"], r["min_linux_driver"]) for r in _driver_rows()
                  if r["release"] == "GA"), key=lambda row: v(row[0]))


def test_every_toolkit_has_a_ga_row() -> None:
    toolkits = {r["cuda_toolkit"] for r in _driver_rows()}
    assert toolkits == {tk for tk, _ in GA_ROWS}
    assert {"11.0", "11.8", "12.0", "12.2", "13.0", "13.3"} <= toolkits


@pytest.mark.parametrize(("toolkit", "driver"), GA_ROWS)
def test_min_driver_is_the_ga_row(toolkit: str, driver: str) -> None:
    assert min_driver(v(toolkit)) == v(driver)
    assert str(min_driver(v(toolkit))) == driver
    assert max_cuda(v(driver)) == v(toolkit)  # the GA driver reports exactly this toolkit


@pytest.mark.parametrize(("toolkit", "driver"), GA_ROWS[1:])
def test_one_below_the_ga_driver_is_the_previous_toolkit(toolkit: str, driver: str) -> None:
    parts = [int(p) for p in driver.split(".")]
    parts[-1] -= 1
    previous = GA_ROWS[[tk for tk, _ in GA_ROWS].index(toolkit) - 1][0]
    assert max_cuda(Version(tuple(parts))) == v(previous)


# --- the CUDA floor syntax ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "floor"),
    [(">=12.1", "12.1"), ("12.1+", "12.1"), ("12.1", "12.1"), (" >= 12.1 ", "12.1"),
     ("12", "12.0"), (">=11.8", "11.8"), ("13.0+", "13.0")],
)
def test_parse_cuda_floor(text: str, floor: str) -> None:
    assert parse_cuda_floor(text) == v(floor)


@pytest.mark.parametrize("text", ["<12", "==12.1", "~=12.1", "!=12.1", ">12", "13.9", "10.2",
                                  "abc", ""])
def test_parse_cuda_floor_rejects(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_cuda_floor(text)
    assert info.value.field == "cuda"
