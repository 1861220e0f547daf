"""Every capture in tests/fixtures/nvidia-smi parses to the values read off the file by hand.

The expected values below were read from the capture files themselves (grep on the raw text),
not from the parsers' output. "None" is what an "N/A", "[N/A]" or absent element must become.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bourse.agent.probe import (
    SmiReading,
    parse_csv,
    parse_query_gpu,
    parse_table,
    parse_text,
    parse_xml,
)
from bourse.core.gpus import catalogue

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
PARSERS = {"xml": parse_xml, "txt": parse_text, "csv": parse_csv, "table": parse_table}
H100_UUIDS = [
    "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa", "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00",
    "GPU-167d8376-ee13-fca4-938a-a05167c43cdc", "GPU-afe9f2ed-9dd0-572c-3cd8-b42b58b3bc99",
    "GPU-2b6f61f9-8b00-3b57-d912-b62792120662", "GPU-980ea11b-91dc-db7b-72ac-0685abc43658",
    "GPU-4ef109e9-e925-4834-2b85-0771b4ef696c", "GPU-b0fe4996-1f7c-91f6-0ccd-08ae3b7e23c5",
]
RTX4090_UUIDS = [
    "GPU-988008fc-0059-17f4-9001-0ab4143e0e63", "GPU-8a088451-845e-a9c1-07e1-c1e926f452f3",
    "GPU-f71df46d-7f71-ba7d-236f-4dc37ee27f74", "GPU-0f6b9cca-9bf0-6917-6381-7b2a5238664d",
    "GPU-228019e0-1924-11e3-0be8-13175614bea4", "GPU-981e6212-2f59-0a5c-39c5-163c04f04e3f",
    "GPU-457a5c04-0848-b074-549f-4294f3cfce65", "GPU-78289b93-0248-1915-dc72-4427058400fa",
]
RTX2080TI_UUIDS = [
    "GPU-2a8f06c3-0000-0000-0000-000000000000", "GPU-16bca67b-0000-0000-0000-000000000000",
    "GPU-e53e5dfb-0000-0000-0000-000000000000", "GPU-198d6802-0000-0000-0000-000000000000",
]
ZERO_UUID = "GPU-00000000-0000-0000-0000-000000000000"
NO_ERRORS = {"ecc_uncorrectable_volatile": 0, "ecc_uncorrectable_aggregate": 0}
ROWS_OK = {"remapped_rows_uncorrectable": 0, "remapped_rows_pending": False,
           "remapped_rows_failure": False}


def pcie(gen: int, gen_max: int, width: int, width_max: int) -> dict[str, int]:
    return {"pcie_gen_current": gen, "pcie_gen_max": gen_max, "pcie_width_current": width,
            "pcie_width_max": width_max}


def power(limit: float, default: float | None) -> dict[str, float | None]:
    return {"power_limit_w": limit, "power_default_limit_w": default}


# file -> (driver, CUDA, [per-GPU expected fields]); fields not listed are not asserted.
EXPECTED: dict[str, tuple[str | None, str | None, list[dict[str, Any]]]] = {
    "xml-a10g-drv515.xml": ("515.105.01", "11.7", [dict(
        model="a10g", name="NVIDIA A10G", memory_mib=23028, compute_capability="8.6",
        uuid="GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94", pci_bus_id="00000000:00:1E.0",
        **pcie(1, 4, 8, 16), mig_enabled=None, mig_instances=[], ecc_enabled=True, **NO_ERRORS,
        **ROWS_OK, retired_pages=None, retired_pages_pending=None, **power(300, 300),
        clock_event_reasons=[])]),
    "xml-grid-k520-drv352.xml": ("352.99", None, [dict(
        model="grid-k520", name="GRID K520", memory_mib=4095, compute_capability="3.0",
        uuid="GPU-cc96d6f4-7f66-e1fc-8179-a45dbd47664c", **pcie(1, 3, 16, 16),
        mig_enabled=None, ecc_enabled=None, ecc_uncorrectable_volatile=None,
        ecc_uncorrectable_aggregate=None, remapped_rows_failure=None, retired_pages=None,
        retired_pages_pending=None, **power(125, 125))]),
    "xml-gt1030-drv470.xml": ("470.74", "11.4", [dict(
        model="gt-1030", name="NVIDIA GeForce GT 1030", memory_mib=1998,
        uuid="GPU-857c6374-f681-cf3a-f99f-9063a87b8ac0", **pcie(3, 3, 4, 4), mig_enabled=None,
        ecc_enabled=None, ecc_uncorrectable_volatile=None, remapped_rows_pending=None,
        **power(30, 30))]),
    "xml-gtx1080-x2-drv460.xml": ("460.27.04", "11.2", [dict(
        model="gtx-1080", name="GeForce GTX 1080", memory_mib=memory, uuid=uuid,
        **pcie(3, 3, 1, 16), ecc_enabled=None, **power(216, 200),
        clock_event_reasons=["sw_power_cap"]) for uuid, memory in (
        ("GPU-683c6e09-3969-31a5-b7ca-cc88252b7fce", 8116),
        ("GPU-90e3dab0-b59d-8bf6-d909-d4fab8d2f29b", 8119))]),
    "xml-quadro-p2000-drv418.xml": ("418.56", "10.1", [dict(
        model="quadro-p2000", name="Quadro P2000", memory_mib=5059,
        uuid="GPU-1ffe36ef-ac55-60ad-f9cf-623871e7736d", **pcie(3, 3, 16, 16),
        mig_enabled=None, ecc_enabled=None, **power(75, 75))]),
    "xml-quadro-p2200-drv450.xml": ("450.80.02", "11.0", [dict(
        model="quadro-p2200", name="Quadro P2200", memory_mib=5058,
        uuid="GPU-4c049112-c7f5-5135-55da-7b4be79fb20b", **pcie(3, 3, 16, 16),
        ecc_enabled=None, **power(75, 75))]),
    "xml-rtx-a5000-x2-drv590.xml": ("590.44.01", "13.1", [dict(
        model="rtx-a5000", name="NVIDIA RTX A5000", memory_mib=24564, uuid=uuid,
        **pcie(1, 4, 16, 16), ecc_enabled=False, ecc_uncorrectable_volatile=None,
        ecc_uncorrectable_aggregate=None, **ROWS_OK, **power(230, 230),
        clock_event_reasons=[]) for uuid in (
        "GPU-12345678-aaaa-bbbb-cccc-0123456789ab", "GPU-12345678-aaaa-bbbb-cccc-0123456789cd")]),
    "xml-rtx3060-drv570.xml": ("570.124.04", "12.8", [dict(
        model="rtx-3060", name="NVIDIA GeForce RTX 3060", memory_mib=12288,
        uuid="GPU-d6889ff6-2523-9142-ca3c-1ca3f396a625", **pcie(1, 4, 16, 16),
        ecc_enabled=None, remapped_rows_failure=None, **power(170, 170))]),
    "xml-rtx3080-win-drv536.xml": ("536.40", "12.2", [dict(
        model="rtx-3080", name="NVIDIA GeForce RTX 3080", memory_mib=10240,
        uuid="GPU-19d6d965-2acc-f646-00f8-4c76979aabb4", **pcie(4, 4, 16, 16),
        ecc_enabled=None, **power(336, 320))]),
    "xml-rtx3090-drv525.xml": ("525.147.05", "12.0", [dict(
        model="rtx-3090", name="NVIDIA GeForce RTX 3090", memory_mib=24576,
        uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab", **pcie(1, 4, 16, 16),
        ecc_enabled=None, **power(200, 350))]),
    "xml-rtx4000-sff-ada-drv595.xml": ("595.84", "13.2", [dict(
        model="rtx-4000-ada", name="NVIDIA RTX 4000 SFF Ada Generation", memory_mib=20475,
        uuid="GPU-37037c3f-65c8-ec4d-24a9-420204ad8026", **pcie(1, 4, 16, 16),
        ecc_enabled=False, **ROWS_OK, **power(70, 70))]),
    "xml-t4-win-drv512.xml": ("512.78", "11.6", [dict(
        model="t4", name="Tesla T4", memory_mib=15360, compute_capability="7.5",
        uuid="GPU-f6e826dc-c9d7-ac58-6d5d-9048c9e1c124", **pcie(3, 3, 16, 16),
        ecc_enabled=True, **NO_ERRORS, retired_pages=0, retired_pages_pending=False,
        **power(70, 70))]),
    "xml-a100-sxm4-40gb-mig-drv510.xml": ("510.47.03", "11.6", [dict(
        model="a100-40gb", name="NVIDIA A100-SXM4-40GB", memory_mib=40960,
        compute_capability="8.0", uuid="GPU-27b94a00-ed54-5c24-b1fd-1054085de32a",
        pci_bus_id="00000000:00:04.0", **pcie(4, 4, 16, 16), mig_enabled=True, mig_pending=True,
        ecc_enabled=True, ecc_uncorrectable_volatile=None, ecc_uncorrectable_aggregate=0,
        remapped_rows_uncorrectable=None, remapped_rows_failure=None, retired_pages=None,
        **power(400, 400), clock_event_reasons=[])]),
    # The XML has no compute capability: it comes from the catalogue.
    "xml-rtx2080-win-drv516.xml": ("516.59", "11.7", [dict(
        model="rtx-2080", name="NVIDIA GeForce RTX 2080", memory_mib=8192, compute_capability="7.5",
        uuid="GPU-fbd55ed4-1eec-4423-0a47-ad594b4333e3", pci_bus_id="00000000:0A:00.0",
        **pcie(3, 3, 8, 16), mig_enabled=None, ecc_enabled=None, **power(275, 275),
        clock_event_reasons=[])]),
    # A laptop part is its own model, not the desktop rtx-3060 (12 GB).
    "xml-rtx3060-laptop-drv515.xml": ("515.65.01", "11.7", [dict(
        model="rtx-3060-laptop", name="NVIDIA GeForce RTX 3060 Laptop GPU", memory_mib=6144,
        compute_capability="8.6",
        uuid="GPU-473d8d0f-d462-185c-6b36-6fc23e23e571", pci_bus_id="00000000:01:00.0",
        **pcie(1, 4, 8, 16), ecc_enabled=None, power_limit_w=None, power_default_limit_w=None)]),
    "xml-rtx4090-drv535.xml": ("535.86.05", "12.2", [dict(
        model="rtx-4090", name="NVIDIA GeForce RTX 4090", memory_mib=24564,
        uuid="GPU-71d1acc2-662d-2166-bf9f-65272d2fc437", pci_bus_id="00000000:84:00.0",
        **pcie(1, 3, 16, 16), ecc_enabled=False, ecc_uncorrectable_volatile=None, **ROWS_OK,
        **power(450, 450))]),
    "xml-tesla-p100-drv510.xml": ("510.47.03", "11.6", [dict(
        model="p100-16gb", name="Tesla P100-PCIE-16GB", memory_mib=16384,
        compute_capability="6.0", uuid="GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e",
        **pcie(3, 3, 16, 16), ecc_enabled=True, **NO_ERRORS, remapped_rows_uncorrectable=None,
        retired_pages=0, retired_pages_pending=False, **power(250, 250))]),
    "txt-a10-drv535.txt": ("535.129.03", "12.2", [dict(
        model="a10", name="NVIDIA A10", memory_mib=23028, pci_bus_id="00000000:07:00.0",
        uuid="GPU-73d12ef7-f589-f867-4259-c7090ab44736", **pcie(4, 4, 16, 16),
        mig_enabled=None, ecc_enabled=True, **NO_ERRORS, remapped_rows_uncorrectable=4,
        remapped_rows_pending=True, remapped_rows_failure=False, retired_pages=None,
        **power(150, 150), clock_event_reasons=[])]),
    "txt-h100-80gb-hbm3-x8-drv535.txt": ("535.161.08", "12.2", [dict(
        model="h100-80gb", name="NVIDIA H100 80GB HBM3", memory_mib=81559, uuid=uuid,
        **pcie(5, 5, 16, 16), mig_enabled=False, mig_pending=False, ecc_enabled=True,
        **NO_ERRORS, **ROWS_OK, **power(700, 700),
        clock_event_reasons=["hw_slowdown", "hw_power_brake_slowdown"]) for uuid in H100_UUIDS]),
    "txt-l40s-drv595.txt": ("595.80", "13.2", [dict(
        model="l40s", name="NVIDIA L40S", memory_mib=46068, uuid=ZERO_UUID,
        **pcie(4, 4, 16, 16), mig_enabled=None, ecc_enabled=True, **NO_ERRORS, **ROWS_OK,
        **power(350, 350))]),
    "txt-rtx2080ti-x4-drv545.txt": ("545.23.08", "12.3", [dict(
        model="rtx-2080-ti", name="NVIDIA GeForce RTX 2080 Ti", memory_mib=11264, uuid=uuid,
        **pcie(3 if i == 0 else 1, 3, 16, 16), ecc_enabled=None,
        ecc_uncorrectable_volatile=None, remapped_rows_failure=None, **power(250, 250),
        clock_event_reasons=["sw_thermal_slowdown"] if i == 0 else [])
        for i, uuid in enumerate(RTX2080TI_UUIDS)]),
    "txt-rtx4090-x8-drv535.txt": ("535.154.05", "12.2", [dict(
        model="rtx-4090", name="NVIDIA GeForce RTX 4090", memory_mib=24564, uuid=uuid,
        **pcie(1, 4, 16, 16), ecc_enabled=False, ecc_uncorrectable_volatile=None, **ROWS_OK,
        **power(450, 450)) for uuid in RTX4090_UUIDS]),
    # Cut after the first GPU's clock reasons (the source calls it invalid): what is there.
    "txt-h100-80gb-hbm3-truncated-drv535.txt": ("535.183.01", "12.2", [dict(
        model="h100-80gb", name="NVIDIA H100 80GB HBM3", memory_mib=None,
        uuid="GPU-566e6f65-c38e-b12f-4824-6944218668b9", pci_bus_id="00000000:53:00.0",
        **pcie(5, 5, 16, 16), mig_enabled=False, ecc_enabled=None, power_limit_w=None,
        clock_event_reasons=[])]),
    "txt-h100-mig-drv590.txt": ("590.48.01", "13.1", [dict(
        model="h100-80gb", name="NVIDIA H100 80GB HBM3", memory_mib=81559, uuid=ZERO_UUID,
        pci_bus_id="00000000:00:09.0", **pcie(5, 5, 16, 16), mig_enabled=True, mig_pending=True,
        ecc_enabled=True, **NO_ERRORS, remapped_rows_uncorrectable=None, retired_pages=None,
        **power(700, 700), clock_event_reasons=[])]),
    # R610: "Driver Version : 610.57.04 [Deprecated; ...]" beside "KMD Version : 610.57.04".
    **{name: (driver, "13.3", [dict(
        model="rtx-2080-super", name="NVIDIA GeForce RTX 2080 SUPER", memory_mib=8192,
        uuid=ZERO_UUID, pci_bus_id="00000000:0C:00.0", **pcie(gen, 3, 16, 16), mig_enabled=None,
        ecc_enabled=None, ecc_uncorrectable_volatile=None, remapped_rows_uncorrectable=None,
        retired_pages=None, **power(250, 250), clock_event_reasons=[])])
       for name, driver, gen in (("txt-rtx2080super-drv610.txt", "610.57.04", 1),
                                 ("txt-rtx2080super-win-drv610.txt", "610.62", 3))},
    # The CSV has no CUDA column: the version comes from NVIDIA's driver table.
    "csv-h200-drv590.csv": ("590.48.01", "13.1", [dict(
        model="h200", name="NVIDIA H200", memory_mib=143771, compute_capability="9.0",
        uuid=ZERO_UUID, pci_bus_id="00000000:83:00.0", **pcie(5, 5, 16, 16),
        mig_enabled=False, mig_pending=False, ecc_enabled=True, **NO_ERRORS, **ROWS_OK,
        retired_pages=None, retired_pages_pending=None, **power(700, 700))]),
    "csv-l40s-drv595.csv": ("595.80", "13.2", [dict(
        model="l40s", name="NVIDIA L40S", memory_mib=46068, compute_capability="8.9",
        **pcie(4, 4, 16, 16), mig_enabled=None, ecc_enabled=True, **NO_ERRORS, **ROWS_OK,
        **power(350, 350))]),
    "csv-rtx4080super-drv595.csv": ("595.71.05", "13.2", [dict(
        model="rtx-4080-super", name="NVIDIA GeForce RTX 4080 SUPER", memory_mib=16376,
        compute_capability="8.9", **pcie(4, 4, 16, 16), ecc_enabled=None,
        ecc_uncorrectable_volatile=None, remapped_rows_pending=None, **power(320, 320))]),
    "csv-unknown-x3.csv": (None, None, [dict(
        model=None, name="unknown", memory_mib=memory, uuid=uuid, **power(216, None))
        for uuid, memory in (("GPU-20fe89bc-c8ef-5a9f-078e-efa3324d790b", 8119),
                             ("GPU-68988cf6-8de9-6585-a263-d2e3ea96b75a", 4043),
                             ("GPU-90e3dab0-b59d-8bf6-d909-d4fab8d2f29b", 8119))]),
    "csv-h100-mig-drv590.csv": ("590.48.01", "13.1", [dict(
        model="h100-80gb", name="NVIDIA H100 80GB HBM3", memory_mib=81559,
        compute_capability="9.0", uuid=ZERO_UUID, pci_bus_id="00000000:00:09.0",
        **pcie(5, 5, 16, 16), mig_enabled=True, mig_pending=True, ecc_enabled=True, **NO_ERRORS,
        remapped_rows_uncorrectable=None, **power(700, 700), clock_event_reasons=[])]),
    "csv-rtx2080super-drv610.csv": ("610.57.04", "13.3", [dict(
        model="rtx-2080-super", name="NVIDIA GeForce RTX 2080 SUPER", memory_mib=8192,
        compute_capability="7.5", uuid=ZERO_UUID, pci_bus_id="00000000:0C:00.0",
        **pcie(1, 3, 16, 16), mig_enabled=None, ecc_enabled=None,
        ecc_uncorrectable_volatile=None, remapped_rows_pending=None, **power(250, 250),
        clock_event_reasons=[])]),
    # The table of the same machine says "CUDA UMD Version: 13.4"; NVIDIA's driver table, which
    # the CSV's CUDA comes from, knows 13.3 as the newest for 616.92.
    "csv-rtx5070ti-laptop-wsl-drv616.csv": ("616.92", "13.3", [dict(
        model="rtx-5070-ti-laptop", name="NVIDIA GeForce RTX 5070 Ti Laptop GPU",
        memory_mib=12227, compute_capability="12.0")]),
    # --format=csv,nounits without a memory.total column: reserved + used + free (103 + 0 +
    # 16280), which is nvidia-smi's Total to within its rounding (the same board's XML: 16384).
    "csv-tesla-p100-nounits-drv510.csv": (None, None, [dict(
        model="p100-16gb", name="Tesla P100-PCIE-16GB", memory_mib=16383,
        uuid="GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6")]),
    "table-h200-drv590.txt": ("590.48.01", "13.1", [dict(
        model="h200", name="NVIDIA H200", memory_mib=143771, pci_bus_id="00000000:83:00.0",
        mig_enabled=False, ecc_uncorrectable_volatile=0, power_limit_w=700)]),
    "table-h200-mig-drv590.txt": ("590.48.01", "13.1", [dict(
        model="h200", name="NVIDIA H200", memory_mib=143771, mig_enabled=True,
        ecc_uncorrectable_volatile=None, power_limit_w=700)]),
    "table-l40s-drv595.txt": ("595.80", "13.2", [dict(
        model="l40s", name="NVIDIA L40S", memory_mib=46068, mig_enabled=None,
        ecc_uncorrectable_volatile=0, power_limit_w=350)]),
    "table-geforce-err-drv525.txt": ("525.125.06", "12.0", [dict(
        model=None, name="NVIDIA GeForce ...", memory_mib=23028, pci_bus_id="00000000:01:00.0",
        ecc_uncorrectable_volatile=0, mig_enabled=None, power_limit_w=450)]),
    "table-h100-80gb-hbm3-x8-drv550.txt": ("550.90.07", "12.4", [dict(
        model="h100-80gb", name="NVIDIA H100 80GB HBM3", memory_mib=81559,
        pci_bus_id=f"00000000:{bus}:00.0", mig_enabled=False, ecc_uncorrectable_volatile=0,
        power_limit_w=700) for bus in ("19", "3B", "4C", "5D", "9B", "BB", "CB", "DB")]),
    "table-h100-mig-drv590.txt": ("590.48.01", "13.1", [dict(
        model="h100-80gb", name="NVIDIA H100 80GB HBM3", memory_mib=81559,
        pci_bus_id="00000000:00:09.0", mig_enabled=True, ecc_uncorrectable_volatile=None,
        power_limit_w=700)]),
    # R610 header: "KMD Version: 610.57.04   CUDA UMD Version: 13.3".
    **{name: (driver, "13.3", [dict(
        model="rtx-2080-super", name="NVIDIA GeForce RTX 2080 ...", memory_mib=8192,
        pci_bus_id="00000000:0C:00.0", ecc_uncorrectable_volatile=None, mig_enabled=None,
        power_limit_w=250)])
       for name, driver in (("table-rtx2080super-drv610.txt", "610.57.04"),
                            ("table-rtx2080super-win-drv610.txt", "610.62"))},
    # WSL prints "NVIDIA-SMI 615.71.08  KMD Version: 616.92": the driver is the KMD one. The
    # cut name with 12 GiB is the 5070 Ti Laptop (a desktop RTX 5070's name fits the column).
    **{name: ("616.92", "13.4", [dict(
        model="rtx-5070-ti-laptop", name="NVIDIA GeForce RTX 5070 ...", memory_mib=12227,
        pci_bus_id="00000000:02:00.0", mig_enabled=None, power_limit_w=95)])
       for name in ("table-rtx5070ti-laptop-win-drv616.txt",
                    "table-rtx5070ti-laptop-wsl-drv616.txt")},
    # The table cuts the name; the catalogue resolves the prefix with the memory.
    "table-rtx2080super-win-drv591.txt": ("591.86", "13.1", [dict(
        model="rtx-2080-super", name="NVIDIA GeForce RTX 2080 ...", memory_mib=8192,
        ecc_uncorrectable_volatile=None, power_limit_w=250)]),
}


def parse(name: str) -> SmiReading:
    return PARSERS[name.split("-", 1)[0]]((FIXTURES / name).read_text())


def test_every_capture_has_expectations() -> None:
    captures = {p.name for p in FIXTURES.iterdir() if p.name != "MANIFEST.md"}
    assert captures == set(EXPECTED)


# The captures that show something the probe cannot read, with how many things: a CSV without
# a name column (one per GPU), a -q report cut short (no memory, 1 of 8 GPUs).
PARTIAL = {"csv-unknown-x3.csv": 3, "txt-h100-80gb-hbm3-truncated-drv535.txt": 2}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_other_capture_reads_all_it_shows(name: str) -> None:
    assert len(parse(name).problems) == PARTIAL.get(name, 0)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capture_parses_to_the_values_in_the_file(name: str) -> None:
    driver, cuda, gpus = EXPECTED[name]
    found = parse(name)
    assert (found.driver, found.cuda) == (driver, cuda)
    assert len(found.gpus) == len(gpus)
    for index, (gpu, fields) in enumerate(zip(found.gpus, gpus, strict=True)):
        assert gpu.index == index
        actual = {key: getattr(gpu, key) for key in fields}
        expected = dict(fields)
        if "clock_event_reasons" in fields:
            actual["clock_event_reasons"] = sorted(actual["clock_event_reasons"])
            expected["clock_event_reasons"] = sorted(fields["clock_event_reasons"])
        assert actual == expected, f"{name} GPU {index}"


def test_a_cut_name_is_never_the_model_its_prefix_names() -> None:
    """The table cuts only names too long for its column, so "NVIDIA GeForce RTX 2080 ..." is
    a longer name (a 2080 SUPER or Ti), never the RTX 2080 whose whole name the prefix is; the
    memory then tells SUPER (8 GiB) from Ti (11 GiB)."""
    assert catalogue().identify("NVIDIA GeForce RTX 2080", 8192).id == "rtx-2080"
    (gpu,) = parse("table-rtx2080super-drv610.txt").gpus
    assert (gpu.name, gpu.model) == ("NVIDIA GeForce RTX 2080 ...", "rtx-2080-super")


H100_MIGS = [(2, 0, 0, 40448, 60), (3, 0, 1, 20096, 32), (9, 0, 2, 9984, 16),
             (10, 0, 3, 9984, 16)]
# Read off each capture: GPU instance, compute instance, MIG device index, memory total, SMs.
MIG_DEVICES = {
    "table-h200-mig-drv590.txt": [(2, 0, 0, 71424, 16), (2, 1, 1, 71424, 32),
                                  (3, 0, 2, 33280, 32), (9, 0, 3, 16384, 16),
                                  (10, 0, 4, 16384, 16)],
    "table-h100-mig-drv590.txt": H100_MIGS,
    # R590's -q puts "MIG Device" blocks straight under the GPU, with "Shared FB Memory Usage".
    "txt-h100-mig-drv590.txt": H100_MIGS,
    "xml-a100-sxm4-40gb-mig-drv510.xml": [(1, 0, 0, 19968, 42), (2, 0, 1, 19968, 42)],
}


@pytest.mark.parametrize("name", sorted(MIG_DEVICES))
def test_mig_devices_of_each_mig_capture(name: str) -> None:
    (gpu,) = parse(name).gpus
    found = [(m.gpu_instance_id, m.compute_instance_id, m.index, m.memory_mib,
              m.multiprocessors) for m in gpu.mig_instances]
    assert found == MIG_DEVICES[name]


@pytest.mark.parametrize("absent", ["N/A", "[N/A]", "Not Supported", "[Not Supported]",
                                    "[Requested functionality has been deprecated]", ""])
def test_placeholders_become_null_in_every_format(absent: str) -> None:
    xml = (f"<nvidia_smi_log><driver_version>{absent}</driver_version><gpu id='0'>"
           f"<product_name>NVIDIA A10G</product_name><fb_memory_usage><total>{absent}"
           f"</total></fb_memory_usage><ecc_errors><volatile><dram_uncorrectable>{absent}"
           "</dram_uncorrectable></volatile></ecc_errors></gpu></nvidia_smi_log>")
    (gpu,) = parse_xml(xml).gpus
    assert (gpu.memory_mib, gpu.ecc_uncorrectable_volatile, gpu.model) == (None, None, "a10g")
    csv_text = f"name, memory.total [MiB], pcie.link.gen.max\nNVIDIA L4, {absent}, {absent}\n"
    (row,) = parse_csv(csv_text).gpus
    assert (row.memory_mib, row.pcie_gen_max) == (None, None)
    text = f"GPU 00000000:01:00.0\n    Product Name : NVIDIA L4\n    FB Memory Usage\n" \
           f"        Total : {absent}\n"
    assert parse_text(text).gpus[0].memory_mib is None


def test_unknown_names_keep_the_raw_name_and_a_null_model() -> None:
    (gpu,) = parse_csv("name, memory.total [MiB]\nNVIDIA Quantum Z9000, 65536 MiB\n").gpus
    assert (gpu.name, gpu.model, gpu.memory_mib) == ("NVIDIA Quantum Z9000", None, 65536)


def test_the_first_probes_query_interface_still_parses() -> None:
    gpus, driver = parse_query_gpu("NVIDIA A10G, 23028, GPU-9a9a6c50, 515.105.01\n")
    assert driver == "515.105.01"
    assert [(g.model, g.memory_mib, g.uuid) for g in gpus] == [("a10g", 23028, "GPU-9a9a6c50")]

