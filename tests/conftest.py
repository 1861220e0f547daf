"""Settings of the whole suite.

Bytecode is written whatever ``PYTHONDONTWRITEBYTECODE`` says (container images often set
it): the suite starts hundreds of ``python -m bourse`` processes (coordinators, agents, the
CLI), and without ``__pycache__`` each compiles the ~200 modules it imports from source
(0.6 CPU-s a coordinator start); pytest's rewritten test modules are cached the same way
(15 CPU-s of each worker's collection). The files are ignored by git and left out of bundles.
This is loaded before pytest imports a test module and before xdist starts its workers,
whose environment, like every process a test starts, no longer has the variable.
"""

from __future__ import annotations

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
