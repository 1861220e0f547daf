"""bourse: an open, self-hostable exchange for GPU compute."""

from bourse.app import App, Data, Flow, Handle, PythonScript, Result, StageFailed, Work, wait
from bourse.core.compute import Compute

__all__ = ["App", "Compute", "Data", "Flow", "Handle", "PythonScript", "Result", "StageFailed",
           "Work", "__version__", "wait"]
__version__ = "0.1.0"
