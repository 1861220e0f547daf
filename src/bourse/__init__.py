"""bourse: an open, self-hostable exchange for GPU compute.

The names below load on first use (PEP 562): ``import bourse`` is on the path of every
``bourse`` process, agents and coordinators included, and most never touch the app API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bourse.app import (
        App,
        Data,
        Flow,
        Handle,
        PythonScript,
        Result,
        Service,
        StageFailed,
        Work,
        wait,
    )
    from bourse.core.compute import Compute

__all__ = ["App", "Compute", "Data", "Flow", "Handle", "PythonScript", "Result", "Service",
           "StageFailed", "Work", "__version__", "wait"]
__version__ = "0.1.0"

_HOME = {name: "bourse.app" for name in __all__} | {"Compute": "bourse.core.compute"}


def __getattr__(name: str) -> Any:
    if name not in _HOME or name == "__version__":
        raise AttributeError(f"module 'bourse' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value  # the next look-up is a plain one
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
