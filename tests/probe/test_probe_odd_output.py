"""Odd nvidia-smi output never crashes the probe: it reads what it can and says what it could
not. Each input is a real capture from tests/fixtures/nvidia-smi, whole or with one value made
odd as the test says (the odd values are ones the parsers crashed on before: a number past
float range, a 5000-digit number, a carriage return, a 200 KiB cell, a 5000-deep tree)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bourse.agent.probe import SmiOutputError, parse_csv, parse_table, parse_text, parse_xml
from bourse.agent.probe.gpus import probe_gpus
from bourse.agent.probe.nvml import read_nvml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
Install = Callable[..., Path]


def capture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_a_truncated_report_gives_what_it_shows_and_says_what_it_lacks() -> None:
    found = parse_text(capture("txt-h100-80gb-hbm3-truncated-drv535.txt"))
    (gpu,) = found.gpus
    assert (gpu.model, gpu.uuid, gpu.memory_mib) == (
        "h100-80gb", "GPU-566e6f65-c38e-b12f-4824-6944218668b9", None)
    assert found.problems == (
        "nvidia-smi -q: GPU 0 (00000000:53:00.0) shows no memory total",
        "nvidia-smi -q: says 8 GPUs are attached but shows 1 (the output ends early or names "
        "GPUs this probe cannot read)")


def test_the_probe_keeps_a_partial_reading_when_no_source_reads_more(
        fake_smi: Install) -> None:
    fake_smi(text="txt-h100-80gb-hbm3-truncated-drv535.txt")
    found = probe_gpus()
    assert (found.reading.source, len(found.reading.gpus)) == ("nvidia-smi-text", 1)
    assert any("says 8 GPUs are attached but shows 1" in e for e in found.errors)
    assert [e.split(" exited")[0] for e in found.errors if "exited" in e] == [
        "nvidia-smi -q -x", "nvidia-smi --query-gpu", "nvidia-smi"]


def test_a_partial_reading_gives_way_to_a_complete_one(fake_smi: Install,
                                                       tmp_path: Path) -> None:
    """A -q report that lost its memory section (cut out of the R610 capture) loses to the same
    machine's --query-gpu, which has it."""
    text = capture("txt-rtx2080super-drv610.txt")
    cut = tmp_path / "derived-no-memory.txt"
    cut.write_text(text[:text.index("    FB Memory Usage")]
                   + text[text.index("    BAR1 Memory Usage"):])
    fake_smi(text=str(cut), csv="csv-rtx2080super-drv610.csv",
             table="table-rtx2080super-drv610.txt")
    found = probe_gpus()
    assert found.reading.source == "nvidia-smi-csv"
    assert found.reading.gpus[0].memory_mib == 8192
    assert "nvidia-smi -q: GPU 0 (00000000:0C:00.0) shows no memory total" in found.errors


def test_a_number_past_float_range_is_no_number() -> None:
    text = capture("xml-gtx1080-x2-drv460.xml").replace("<total>8119 MiB</total>",
                                                         f"<total>{'9' * 400} MiB</total>", 1)
    first, second = parse_xml(text).gpus
    assert (first.memory_mib, second.memory_mib) == (8116, None)


def test_a_5000_digit_memory_in_the_table_costs_that_value_only() -> None:
    text = capture("table-h100-80gb-hbm3-x8-drv550.txt")
    text = text.replace("1MiB /  81559MiB", f"1MiB / {'9' * 5000}MiB", 1)
    found = parse_table(text)
    assert [g.memory_mib for g in found.gpus] == [None] + [81559] * 7
    assert found.problems == ("nvidia-smi: GPU 0 (00000000:19:00.0) shows no memory total",)


def test_carriage_returns_in_a_csv_are_dropped() -> None:
    text = capture("csv-rtx2080super-drv610.csv")
    odd = text.replace("\n", "\r\n").replace("NVIDIA GeForce RTX 2080 SUPER,",
                                             "NVIDIA GeForce RTX 2080 SUPER\r,")
    assert parse_csv(odd) == parse_csv(text)


def test_a_csv_cell_over_the_csv_modules_limit_is_an_error_to_report() -> None:
    text = capture("csv-rtx5070ti-laptop-wsl-drv616.csv").replace("616.92", "6" * 200_000)
    with pytest.raises(SmiOutputError, match="not CSV this probe reads"):
        parse_csv(text)


def test_a_5000_deep_report_is_read_without_recursion() -> None:
    text = capture("txt-rtx2080super-drv610.txt")
    deep = "".join(f"{' ' * (12 + i)}Level {i} : Active\n" for i in range(5000))
    odd = text.replace("        SW Power Cap ", deep + "        SW Power Cap ", 1)
    (gpu,) = parse_text(odd).gpus
    assert (gpu.model, len(gpu.clock_event_reasons)) == ("rtx-2080-super", 5000)


def test_a_gpu_block_a_parser_fails_on_costs_that_gpu_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A parser's blind spot, simulated: reading the second GPU's clock reasons fails."""
    from bourse.agent.probe import smi_xml
    real = smi_xml._reasons

    def reasons(g: Any) -> list[str]:
        if g.findtext("uuid") == "GPU-90e3dab0-b59d-8bf6-d909-d4fab8d2f29b":
            raise KeyError("clocks_event_reasons")
        return real(g)

    monkeypatch.setattr(smi_xml, "_reasons", reasons)
    found = parse_xml(capture("xml-gtx1080-x2-drv460.xml"))
    assert [g.uuid for g in found.gpus] == ["GPU-683c6e09-3969-31a5-b7ca-cc88252b7fce"]
    assert found.problems == (
        "nvidia-smi -q -x: GPU 1 could not be read (KeyError: 'clocks_event_reasons'); left out",
        "nvidia-smi -q -x: says 2 GPUs are attached but shows 1 (the output ends early or names "
        "GPUs this probe cannot read)")


def test_a_parser_that_fails_outright_costs_its_source_only(
        fake_smi: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(text: str) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("bourse.agent.probe.gpus.parse_text", broken)
    fake_smi(text="txt-rtx2080super-drv610.txt", csv="csv-rtx2080super-drv610.csv",
             table="table-rtx2080super-drv610.txt")
    found = probe_gpus()
    assert found.reading.source == "nvidia-smi-csv"
    assert ("nvidia-smi -q: output this probe could not read (RecursionError: maximum "
            "recursion depth exceeded)") in found.errors


class LostSecondGpu:
    """Two A10s (values of txt-a10-drv535.txt) where the second has fallen off the bus."""

    class NVMLError(Exception):
        pass

    def __getattr__(self, name: str) -> Any:
        def unsupported(*args: Any) -> Any:
            raise self.NVMLError(f"{name}: Not Supported")
        return unsupported

    def nvmlInit(self) -> None: pass
    def nvmlShutdown(self) -> None: pass
    def nvmlSystemGetDriverVersion(self) -> str: return "535.129.03"
    def nvmlDeviceGetCount(self) -> int: return 2
    def nvmlDeviceGetName(self, h: int) -> str: return "NVIDIA A10"

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i == 1:
            raise self.NVMLError("GPU is lost")
        return i

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return type("Memory", (), {"total": 23028 * 2**20})()


def test_a_lost_gpu_costs_itself_in_nvml() -> None:
    found = read_nvml(LostSecondGpu())
    assert found is not None
    assert [(g.model, g.memory_mib) for g in found.gpus] == [("a10", 23028)]
    assert found.problems == ("NVML: GPU 1 could not be read (NVMLError: GPU is lost); left out",)
