"""The checkpoint-contract examples of docs/spot.md (examples/spot_*.py), run as the exchange
runs a job: a real process, SIGTERMed mid-training once it has a checkpoint, must save and
exit 143; run again, it resumes from that checkpoint and finishes. The page shows each file
whole: it must show them as they are."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DOC = EXAMPLES.parent / "docs" / "spot.md"
WAIT_S = 90.0


def env_for(tmp_path: Path, attempt: int, **extra: str) -> dict[str, str]:
    return {**os.environ, "BOURSE_CHECKPOINT_URI": (tmp_path / "ckpt").as_uri() + "/",
            "BOURSE_ATTEMPT": str(attempt), **({"BOURSE_RESUME": "1"} if attempt > 1 else {}),
            **extra}


def interrupted(args: list[str], env: dict[str, str], after: str) -> str:
    """Run until a line containing ``after`` is printed, SIGTERM it; its whole output."""
    proc = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines, deadline = [], time.monotonic() + WAIT_S
    try:
        for line in proc.stdout:
            lines.append(line)
            if after in line:
                proc.send_signal(signal.SIGTERM)
                break
            assert time.monotonic() < deadline, "".join(lines)
        lines.extend(proc.stdout)
        assert proc.wait(WAIT_S) == 143, "".join(lines)
    finally:
        proc.kill()
    return "".join(lines)


def finished(args: list[str], env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                         timeout=WAIT_S, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("name", ["spot_pytorch.py", "spot_lightning.py"])
def test_the_page_shows_each_example_as_it_is(name: str) -> None:
    text = (EXAMPLES / name).read_text()
    code = text[text.index('"""', 3) + 3:].lstrip("\n")  # the file less its docstring
    assert f"```python\n# examples/{name}\n{code}```\n" in DOC.read_text()


@pytest.mark.slow
def test_plain_pytorch_example_saves_on_sigterm_and_resumes(tmp_path: Path) -> None:
    args = [str(EXAMPLES / "spot_pytorch.py"), "200"]
    first = interrupted(args, env_for(tmp_path, 1, STEP_SLEEP_S="0.01"), "saved step 50")
    saved = [int(line.split()[-1]) for line in first.splitlines()
             if line.startswith("saved step")]
    assert saved[-1] > 50  # the save the notice asked for, after the periodic ones

    second = finished(args, env_for(tmp_path, 2))
    assert f"attempt 2 starts at step {saved[-1]}" in second
    assert "done at step 200" in second


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*LeafSpec.*")
def test_lightning_example_saves_on_sigterm_and_resumes(tmp_path: Path) -> None:
    args = [str(EXAMPLES / "spot_lightning.py"), "4", "0.01"]
    first = interrupted(args, env_for(tmp_path, 1), "epoch 1 ")
    assert "bourse: resuming" not in first

    second = finished(args, env_for(tmp_path, 2))
    assert "bourse: resuming from the newest complete checkpoint under file://" in second
    assert "epoch 0 " not in second  # not from scratch
    assert "done: 64 steps" in second  # 4 epochs of 16 batches, none repeated or skipped
