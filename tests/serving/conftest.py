"""The serving tests run a real exchange: the UI tests' (`tests/ui/ui_exchange.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "ui"))
