"""GPU label normalisation, identification from reported names, and the GPU table itself."""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from importlib import resources
from pathlib import Path

import pytest

from bourse.core.errors import InvalidInput, UnknownGpu
from bourse.core.gpus import MEMORY_TOLERANCE, catalogue, label_key, strict_key

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
DATA = resources.files("bourse").joinpath("data")
A100_FAMILY = {"a100-40gb", "a100-80gb"}


# --- resolve: labels people write ---------------------------------------------------------------

@pytest.mark.parametrize(
    ("label", "ids", "family", "count"),
    [
        ("A100", A100_FAMILY, "a100", None),
        ("a100", A100_FAMILY, "a100", None),
        ("a100-40gb", {"a100-40gb"}, "a100", None),
        ("A100-40GB", {"a100-40gb"}, "a100", None),
        ("a100:2", A100_FAMILY, "a100", 2),
        ("a100-80gb:8", {"a100-80gb"}, "a100", 8),
        ("NVIDIA A100-SXM4-40GB", {"a100-40gb"}, "a100", None),
        ("NVIDIA A100 80GB PCIe", {"a100-80gb"}, "a100", None),
        ("Tesla V100-SXM2-16GB", {"v100-16gb"}, "v100", None),
        ("rtx4090", {"rtx-4090"}, "rtx-4090", None),
        ("RTX 4090", {"rtx-4090"}, "rtx-4090", None),
        ("NVIDIA GeForce RTX 4090", {"rtx-4090"}, "rtx-4090", None),
        ("H100-SXM", {"h100-80gb", "h100-nvl"}, "h100", None),
        ("h100_80gb", {"h100-80gb"}, "h100", None),
        ("NVIDIA H100 80GB HBM3", {"h100-80gb"}, "h100", None),
        ("h100", {"h100-80gb", "h100-nvl"}, "h100", None),
        ("a100 pcie 40gb", {"a100-40gb"}, "a100", None),
        ("A100-80GB-SXM", {"a100-80gb"}, "a100", None),
        ("Radeon Instinct MI25", {"mi25"}, "mi25", None),
        ("AMD Instinct MI300X", {"mi300x"}, "mi300x", None),
        ("Quadro RTX 6000", {"rtx-6000"}, "rtx-6000", None),
        ("rtx-4090:8", {"rtx-4090"}, "rtx-4090", 8),
        # a laptop part is a model of its own, never its desktop namesake (other chip, memory,
        # power), and the desktop label does not mean it
        ("RTX 3060", {"rtx-3060"}, "rtx-3060", None),
        ("rtx 3060 laptop", {"rtx-3060-laptop"}, "rtx-3060-laptop", None),
        ("RTX 3060 Laptop GPU", {"rtx-3060-laptop"}, "rtx-3060-laptop", None),
        ("rtx-5070-ti-laptop:1", {"rtx-5070-ti-laptop"}, "rtx-5070-ti-laptop", 1),
        ("RTX 2080", {"rtx-2080"}, "rtx-2080", None),
        ("RTX 2080 SUPER", {"rtx-2080-super"}, "rtx-2080-super", None),
    ],
)
def test_resolve_labels(label: str, ids: set[str], family: str, count: int | None) -> None:
    selection = catalogue().resolve(label)
    assert set(selection.ids) == ids
    assert len(selection.ids) == len(ids)
    assert selection.family == family
    assert selection.count == count


@pytest.mark.parametrize(
    ("label", "same_as"),
    [
        # case
        ("a100-40GB", "a100-40gb"),
        ("RTX4090", "rtx4090"),
        ("rtx 4080 SUPER", "rtx-4080-super"),
        # spaces, dashes, underscores
        ("a100 40gb", "a100-40gb"),
        ("A100_40GB", "a100-40gb"),
        ("rtx_4090", "rtx-4090"),
        ("RTX-4090", "rtx-4090"),
        ("v100 16gb", "v100-16gb"),
        ("  a100-40gb  ", "a100-40gb"),
        # vendor words
        ("NVIDIA A100", "a100"),
        ("nvidia a100-40gb", "a100-40gb"),
        ("Tesla T4", "t4"),
        ("NVIDIA Tesla T4", "t4"),
        ("GeForce RTX 4090", "rtx-4090"),
        ("nvidia geforce rtx 4090", "rtx-4090"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA Tesla V100", "v100"),
        ("NVIDIA Quadro P2000", "quadro-p2000"),
        ("AMD Radeon Instinct MI25", "mi25"),
        # memory technologies
        ("NVIDIA H100 80GB HBM3", "h100-80gb"),
        ("A100 80GB HBM2e", "a100-80gb"),
        # form factors
        ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
        ("A100 SXM4 80GB", "a100-80gb"),
        ("Tesla V100-PCIE-16GB", "v100-16gb"),
        ("V100-SXM2-32GB", "v100-32gb"),
        ("NVIDIA A100 PCIe", "a100"),
        ("nvidia tesla a100 pcie", "a100"),
        # vendor words that would wrongly pin one size of a family
        ("Tesla V100", "v100"),
        ("Tesla P100", "p100"),
        ("A100 PCIe", "NVIDIA A100 PCIe"),
        ("A100-SXM4", "NVIDIA A100-SXM4"),
        ("H100-SXM", "h100"),
    ],
)
def test_noise_does_not_change_the_selection(label: str, same_as: str) -> None:
    assert catalogue().resolve(label).ids == catalogue().resolve(same_as).ids


@pytest.mark.parametrize(
    ("label", "first_suggestion"),
    [
        ("a100-40", "a100-40gb"),
        ("rtx4091", "rtx-4090"),
        ("h100-80", "h100-80gb"),
        ("l40x", "l40"),
    ],
)
def test_unknown_label_suggests_the_closest(label: str, first_suggestion: str) -> None:
    with pytest.raises(UnknownGpu) as info:
        catalogue().resolve(label)
    error = info.value
    assert error.suggestions[0] == first_suggestion
    assert error.label == label
    assert error.field == "gpu"
    assert first_suggestion in str(error)
    assert isinstance(error, InvalidInput)


@pytest.mark.parametrize("label", ["a100:0", "a100:x", "a100:-1", "a100:", "a100:1.5", "", "  ",
                                   "a100:²", "a100:٣"])
def test_bad_counts_and_empty_labels_are_invalid(label: str) -> None:
    with pytest.raises(InvalidInput) as info:
        catalogue().resolve(label)
    assert not isinstance(info.value, UnknownGpu)
    assert info.value.field == "gpu"


# --- identify: names machines and clouds report ----------------------------------------------

@pytest.mark.parametrize(
    ("name", "memory_mib", "expected"),
    [
        ("A100", 81920, "a100-80gb"),
        ("A100", 80000, "a100-80gb"),
        ("A100", 40960, "a100-40gb"),
        ("A100", 40536, "a100-40gb"),
        ("A100", None, "a100-40gb"),
        ("H100", 96256, "h100-nvl"),
        ("H100", 95830, "h100-nvl"),
        ("H100", 81920, "h100-80gb"),
        ("H100", 81559, "h100-80gb"),
        ("V100", 32768, "v100-32gb"),
        ("V100", 16384, "v100-16gb"),
        ("V100", None, "v100-16gb"),
        ("P100", 12198, "p100-12gb"),
        ("NVIDIA A100-SXM4-80GB", 81920, "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", None, "a100-80gb"),
        ("Tesla V100-SXM2-16GB", None, "v100-16gb"),
        ("A100-80GB", None, "a100-80gb"),
        ("H100-SXM", None, "h100-80gb"),
        ("H100-NVL", None, "h100-nvl"),
        ("GH200", None, "gh200"),
    ],
)
def test_identify_snaps_memory_to_the_family_member(
    name: str, memory_mib: float | None, expected: str
) -> None:
    assert catalogue().identify(name, memory_mib).id == expected


@pytest.mark.parametrize("name", ["A1000", "rtx4091", "Quadro P9999", "TPU-v4"])
def test_identify_unknown_name_raises(name: str) -> None:
    with pytest.raises(UnknownGpu):
        catalogue().identify(name, 16384)


# --- every name the shipped cloud catalogues use ---------------------------------------------

def _catalog_names() -> list[tuple[str, str]]:
    names: set[tuple[str, str]] = set()
    for entry in DATA.joinpath("catalogs").iterdir():
        if not entry.name.endswith(".csv"):
            continue
        with entry.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                name = (row.get("AcceleratorName") or "").strip()
                if name:
                    names.add((entry.name, name))
    return sorted(names)


CATALOG_NAMES = _catalog_names()

# What each raw catalogue name means (the family; a family-only name may be any of its sizes).
CATALOG_FAMILY = {
    "A10": "a10", "A100": "a100", "A100-80GB": "a100", "A100-80GB-SXM": "a100", "A10G": "a10g",
    "A40": "a40", "A6000": "rtx-a6000", "A800": "a800", "B200": "b200", "GH200": "gh200",
    "H100": "h100", "H100-MEGA": "h100", "H100-NVL": "h100", "H100-SXM": "h100", "H200": "h200",
    "H200-SXM": "h200", "K80": "k80", "L4": "l4", "L40": "l40", "L40S": "l40s", "M60": "m60",
    "MI300X": "mi300x", "P100": "p100", "P4": "p4", "RTX3060": "rtx-3060",
    "RTX3090": "rtx-3090", "RTX4000-Ada": "rtx-4000-ada", "RTX4080": "rtx-4080",
    "RTX4090": "rtx-4090", "RTX5090": "rtx-5090", "RTX6000": "rtx-6000",
    "RTX6000-Ada": "rtx-6000-ada", "RTXA4000": "rtx-a4000", "RTXA4500": "rtx-a4500",
    "RTXA5000": "rtx-a5000", "RTXA6000": "rtx-a6000", "Radeon MI25": "mi25", "T4": "t4",
    "V100": "v100", "V100-32GB": "v100",
}


def test_catalog_names_were_found() -> None:
    files = {f for f, _ in CATALOG_NAMES}
    assert len(files) == 9
    assert {n for _, n in CATALOG_NAMES} <= set(CATALOG_FAMILY)


@pytest.mark.parametrize(("file", "name"), CATALOG_NAMES)
def test_every_catalog_accelerator_name_is_identified(file: str, name: str) -> None:
    model = catalogue().identify(name)
    assert model.id in catalogue().models
    assert model.family == CATALOG_FAMILY[name], f"{file}: {name!r} -> {model.id}"


# --- every product name in the real nvidia-smi captures --------------------------------------

def _xml_gpus(path: Path) -> list[tuple[str, float | None]]:
    root = ET.parse(path).getroot()
    return [(gpu.findtext("product_name") or "",
             _mib(gpu.findtext("fb_memory_usage/total") or ""))
            for gpu in root.iter("gpu")]


def _txt_gpus(path: Path) -> list[tuple[str, float | None]]:
    """Each GPU block's name and the GPU's own "FB Memory Usage" total (not a MIG device's
    "Shared FB Memory Usage"); None where the report was cut before its memory section."""
    text = path.read_text(encoding="utf-8")
    blocks = re.split(r"\n(?=GPU [0-9A-Fa-f]{8}:)", text)[1:]
    found: list[tuple[str, float | None]] = []
    for block in blocks:
        name = re.search(r"^\s*Product Name\s*:\s*(.+?)\s*$", block, re.M)
        total = re.search(r"^[ \t]*FB Memory Usage\s*\n\s*Total\s*:\s*(\d+ MiB)", block, re.M)
        assert name, f"{path.name}: a GPU block without a product name"
        found.append((name.group(1), _mib(total.group(1)) if total else None))
    return found


def _csv_gpus(path: Path) -> list[tuple[str, float | None]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, skipinitialspace=True)
        if "name" not in (reader.fieldnames or []):
            return []
        return [(row["name"], _csv_memory(row)) for row in reader]


def _csv_memory(row: dict[str, str]) -> float | None:
    """memory.total; a query without it (netdata's) has reserved + used + free, which add up
    to it. With --format=csv,nounits the unit is only in the header."""
    if "memory.total [MiB]" in row:
        return _mib(row["memory.total [MiB]"])
    parts = [row.get(f"memory.{part} [MiB]") for part in ("reserved", "used", "free")]
    return sum(float(p.split()[0]) for p in parts if p) if all(parts) else None


def _mib(text: str) -> float:
    value, unit = text.split()
    assert unit == "MiB"
    return float(value)


READERS = {"xml": _xml_gpus, "txt": _txt_gpus, "csv": _csv_gpus}

# fixture file -> (model it holds, number of GPUs in it), as MANIFEST.md and the files say. The
# plain tables (table-*) cut long names ("NVIDIA GeForce RTX 2080 ..."): the probe resolves
# those by prefix and memory, checked in tests/probe/test_probe_fixtures.py.
FIXTURE_GPUS = {
    "csv-h100-mig-drv590.csv": ("h100-80gb", 1),
    "csv-h200-drv590.csv": ("h200", 1),
    "csv-l40s-drv595.csv": ("l40s", 1),
    "csv-rtx2080super-drv610.csv": ("rtx-2080-super", 1),
    "csv-rtx4080super-drv595.csv": ("rtx-4080-super", 1),
    "csv-rtx5070ti-laptop-wsl-drv616.csv": ("rtx-5070-ti-laptop", 1),
    "csv-tesla-p100-nounits-drv510.csv": ("p100-16gb", 1),  # no memory.total column
    "txt-a10-drv535.txt": ("a10", 1),
    "txt-h100-80gb-hbm3-truncated-drv535.txt": ("h100-80gb", 1),  # 1 of 8, cut before memory
    "txt-h100-80gb-hbm3-x8-drv535.txt": ("h100-80gb", 8),
    "txt-h100-mig-drv590.txt": ("h100-80gb", 1),
    "txt-l40s-drv595.txt": ("l40s", 1),
    "txt-rtx2080super-drv610.txt": ("rtx-2080-super", 1),
    "txt-rtx2080super-win-drv610.txt": ("rtx-2080-super", 1),
    "txt-rtx2080ti-x4-drv545.txt": ("rtx-2080-ti", 4),
    "txt-rtx4090-x8-drv535.txt": ("rtx-4090", 8),
    "xml-a100-sxm4-40gb-mig-drv510.xml": ("a100-40gb", 1),
    "xml-a10g-drv515.xml": ("a10g", 1),
    "xml-grid-k520-drv352.xml": ("grid-k520", 1),
    "xml-gt1030-drv470.xml": ("gt-1030", 1),
    "xml-gtx1080-x2-drv460.xml": ("gtx-1080", 2),
    "xml-quadro-p2000-drv418.xml": ("quadro-p2000", 1),
    "xml-quadro-p2200-drv450.xml": ("quadro-p2200", 1),
    "xml-rtx-a5000-x2-drv590.xml": ("rtx-a5000", 2),
    "xml-rtx2080-win-drv516.xml": ("rtx-2080", 1),
    "xml-rtx3060-drv570.xml": ("rtx-3060", 1),
    "xml-rtx3060-laptop-drv515.xml": ("rtx-3060-laptop", 1),
    "xml-rtx3080-win-drv536.xml": ("rtx-3080", 1),
    "xml-rtx3090-drv525.xml": ("rtx-3090", 1),
    "xml-rtx4000-sff-ada-drv595.xml": ("rtx-4000-ada", 1),
    "xml-rtx4090-drv535.xml": ("rtx-4090", 1),
    "xml-t4-win-drv512.xml": ("t4", 1),
    "xml-tesla-p100-drv510.xml": ("p100-16gb", 1),
}


def test_fixture_table_covers_every_named_capture() -> None:
    named = {p.name for p in FIXTURES.iterdir() if p.name.split("-", 1)[0] in READERS}
    assert set(FIXTURE_GPUS) == named - {"csv-unknown-x3.csv"}
    assert _csv_gpus(FIXTURES / "csv-unknown-x3.csv") == []  # no name column


@pytest.mark.parametrize(("file", "expected"), sorted(FIXTURE_GPUS.items()))
def test_identify_nvidia_smi_product_names(file: str, expected: tuple[str, int]) -> None:
    model_id, count = expected
    gpus = READERS[file.split("-", 1)[0]](FIXTURES / file)
    assert len(gpus) == count
    for name, memory_mib in gpus:
        assert catalogue().identify(name, memory_mib).id == model_id, name
        assert catalogue().identify(name).id == model_id, name


# --- the table ---------------------------------------------------------------------------------

def _gpu_rows() -> list[dict[str, str]]:
    with DATA.joinpath("gpus.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_gpu_table_loads_without_key_collisions() -> None:
    rows = _gpu_rows()
    cat = catalogue()
    assert len(cat.models) == len(rows)
    assert [r["id"] for r in rows] == list(cat.models)
    for key_of in (strict_key, label_key):
        owners: dict[str, set[str]] = defaultdict(set)
        for model in cat.models.values():
            for spelling in (model.id, *model.names, *model.aliases):
                owners[key_of(spelling)].add(model.id)
        clashes = {k: v for k, v in owners.items() if len(v) > 1}
        assert clashes == {}
    for model in cat.models.values():
        assert model in cat.families[model.family]


def _memory_cases() -> list[object]:
    cases: list[object] = []
    for row in _gpu_rows():
        case = (row["id"], int(row["memory_gb"]), int(row["typical_memory_mib"]))
        cases.append(pytest.param(*case, id=row["id"]))
    return cases


@pytest.mark.parametrize(("model_id", "memory_gb", "memory_mib"), _memory_cases())
def test_typical_memory_is_within_tolerance_of_nominal(
    model_id: str, memory_gb: int, memory_mib: int
) -> None:
    nominal = memory_gb * 1024
    assert abs(memory_mib - nominal) <= MEMORY_TOLERANCE * nominal
    assert catalogue().get(model_id).memory_mib == memory_mib
