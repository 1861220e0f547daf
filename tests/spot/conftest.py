"""The spot tests reuse the end-to-end harness (tests/e2e), the data-plane one and the agent
tests' metadata service stub."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parent / "dataplane"))
sys.path.insert(0, str(HERE.parent / "agent"))
