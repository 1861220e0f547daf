"""The spot tests reuse the end-to-end harness (tests/e2e) and the data-plane one."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parent / "dataplane"))
