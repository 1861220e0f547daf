"""The app API: ``App``, ``Flow``, ``Work``, ``PythonScript`` and the data passed between them;
``Service`` (with ``Readiness``, ``Replicas``, ``Rollout``) for a service's replicas."""

from bourse.app.data import Data
from bourse.app.flow import App, Flow
from bourse.app.handle import Handle, wait
from bourse.app.result import Result, StageFailed
from bourse.app.service import Readiness, Replicas, Rollout, Service
from bourse.app.work import PythonScript, Work

__all__ = ["App", "Data", "Flow", "Handle", "PythonScript", "Readiness", "Replicas", "Result",
           "Rollout", "Service", "StageFailed", "Work", "wait"]
