"""The gang tests use the end-to-end harness (real coordinator and agents) of tests/e2e."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
