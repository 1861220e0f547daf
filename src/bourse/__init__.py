"""bourse: an open, self-hostable exchange for GPU compute.

The app API is imported on first use (PEP 562), so a job that imports one helper
(``bourse.storage.checkpoint``, ``bourse.lightning``) does not pay for the rest: a resumed
attempt starts that much sooner."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bourse.app import App, Data, Flow, Handle, PythonScript, Result, StageFailed, Work, wait
    from bourse.core.compute import Compute

__all__ = ["App", "Compute", "Data", "Flow", "Handle", "PythonScript", "Result", "StageFailed",
           "Work", "__version__", "wait"]
__version__ = "0.1.0"
_HOMES = {"Compute": "bourse.core.compute"}  # the others live in bourse.app


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'bourse' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES.get(name, "bourse.app")), name)
    globals()[name] = value
    return value
