"""The app API: ``App``, ``Flow``, ``Work``, ``PythonScript`` and the data passed between them;
``Service`` (with ``Readiness``, ``Replicas``, ``Rollout``) for a service's replicas.

The service names are loaded on first use: they bring the task-file models and the SDK's HTTP
client, which a stage's runner (one process per stage) never needs — a third of its start."""

import importlib
from typing import TYPE_CHECKING, Any

from bourse.app.data import Data
from bourse.app.flow import App, Flow
from bourse.app.handle import Handle, wait
from bourse.app.result import Result, StageFailed
from bourse.app.work import PythonScript, Work

__all__ = ["App", "Data", "Flow", "Handle", "PythonScript", "Readiness", "Replicas", "Result",
           "Rollout", "Service", "StageFailed", "Work", "wait"]

_LAZY = frozenset({"Readiness", "Replicas", "Rollout", "Service"})

if TYPE_CHECKING:
    from bourse.app.service import Readiness, Replicas, Rollout, Service


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'bourse.app' has no attribute {name!r}")
    value = getattr(importlib.import_module("bourse.app.service"), name)
    globals()[name] = value
    return value
