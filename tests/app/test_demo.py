"""`bourse demo` (what `make demo` runs) end to end, and the demo app it ships: the package's
copy (found in any installation) is the repository's examples/ file, byte for byte."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from app_harness import BOURSE, summary_rows

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHIPPED = Path(__file__).resolve().parents[2] / "src" / "bourse" / "examples"


@pytest.mark.parametrize("name", ["digits_app.py", "digits_model.py"])
def test_the_shipped_demo_app_is_the_example(name: str) -> None:
    assert (SHIPPED / name).read_bytes() == (EXAMPLES / name).read_bytes()


@pytest.mark.slow
def test_the_demo_runs_the_digits_app_on_a_throwaway_exchange(tmp_path: Path) -> None:
    home = tmp_path / "untouched"
    done = subprocess.run([str(BOURSE), "demo"], cwd=tmp_path, text=True, capture_output=True,
                          timeout=600, check=False, env={"BOURSE_HOME": str(home),
                                                         "PATH": str(BOURSE.parent)})

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "real GPU offers" in out  # the market tour
    rows = summary_rows("\n".join(line.strip() for line in out.splitlines()))
    assert rows == [("Prepare", "SUCCEEDED"), ("Train", "SUCCEEDED"), ("Evaluate", "SUCCEEDED")]
    for stage in ("Prepare", "Train", "Evaluate"):  # placement, duration and cost
        assert re.search(rf"^\s*{stage}\s+SUCCEEDED\s+local-\d\s+[\d.]+ s\s+\$[\d.]+\s+j-\S+"
                         rf"\s+local-\d: cheapest fit", out, flags=re.MULTILINE), out
    accuracy = float(re.findall(r"^test accuracy: ([\d.]+) on 360 held-out digits", out,
                                flags=re.MULTILINE)[-1])
    assert accuracy > 0.8
    assert re.search(r"^web UI, signed in: http://127\.0\.0\.1:\d+/ui/login\?next=/ui/runs"
                     r"#token=\S+$", out, flags=re.MULTILINE), out
    assert not home.exists()  # the user's own BOURSE_HOME is left alone
    url = re.findall(r"coordinator at (http://\S+),", out)[0]
    with pytest.raises(OSError):  # and the throwaway exchange is gone
        import urllib.request

        urllib.request.urlopen(f"{url}/healthz", timeout=2)
