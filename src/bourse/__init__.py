"""bourse: an open, self-hostable exchange for GPU compute."""

from bourse.core.compute import Compute

__all__ = ["Compute", "__version__"]
__version__ = "0.1.0"
