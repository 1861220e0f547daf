"""Fixtures of the probe tests: a fake nvidia-smi on PATH that replays real captures."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "nvidia-smi"


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """``fake_smi(xml="xml-a10g-drv515.xml", table=...)`` installs the fake and returns its
    directory. Values name files in tests/fixtures/nvidia-smi, or are absolute paths. NVML is
    made unavailable, as it is on a machine without the NVIDIA driver."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\n" + (HERE / "fake_nvidia_smi.py").read_text())
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setattr("bourse.agent.probe.gpus.read_nvml", lambda nvml=None: None)

    def install(**captures: object) -> Path:
        config = {k: str(FIXTURES / v) if isinstance(v, str) and k in (
            "xml", "text", "csv", "table") and "/" not in v else v for k, v in captures.items()}
        (bin_dir / "capture.json").write_text(json.dumps(config))
        return bin_dir

    return install
