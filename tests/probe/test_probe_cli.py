"""``bourse agent probe``: readable report or JSON, exit 0 / 1 / 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from bourse.cli.main import cli


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["agent", "probe", *args])
    return result.exit_code, result.output


def test_readable_report_on_an_a10g(fake_smi: Callable[..., Path], tmp_path: Path) -> None:
    fake_smi(xml="xml-a10g-drv515.xml")
    code, out = run("--work-dir", str(tmp_path), "--storage-mb", "2")
    assert code == 0, out
    assert "GPUs (source: nvidia-smi-xml, driver 515.105.01, CUDA 11.7)" in out
    assert "a10g   NVIDIA A10G  23028 MiB  8.6" in out
    assert "WARN  gpu0.pcie" in out and "  storage  " in out
    assert "driver 515.105.01: runs torch <= 2.0 (cu117)" in out
    assert "Fingerprint  " in out and "Time         probe " in out


def test_json_and_a_failed_declaration(fake_smi: Callable[..., Path], tmp_path: Path) -> None:
    fake_smi(xml="xml-a10g-drv515.xml")
    code, out = run("--json", "--skip-checks", "--work-dir", str(tmp_path),
                    "--declared-gpus", "a100-80gb:8")
    assert code == 1
    data = json.loads(out)
    assert data["report"]["gpus"][0]["model"] == "a10g"
    assert data["verification"]["status"] == "fail"
    failed = [c for c in data["verification"]["checks"] if c["status"] == "fail"]
    assert [c["reason"].split(":")[0] for c in failed] == [
        "declared 8x a100-80gb, found 1x a10g"]
    assert data["report"]["storage"] is None and data["seconds"] > 0


def test_bad_input_exits_2(tmp_path: Path) -> None:
    code, out = run("--skip-checks", "--work-dir", str(tmp_path), "--declared-gpus", "zz9000")
    assert code == 2 and "unknown GPU 'zz9000'" in out
    code, _ = run("--storage-mb", "0")
    assert code == 2
