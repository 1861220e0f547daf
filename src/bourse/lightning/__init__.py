"""PyTorch Lightning integration: checkpoints in the job's object store, resumed on retry.

Needs the ``train`` extra (``pip install 'bourse[train]'``): Lightning is not a dependency of
the exchange itself.
"""

try:
    import lightning  # noqa: F401  (the extra this package is for)
except ImportError as exc:
    raise ImportError("bourse.lightning needs PyTorch Lightning: pip install 'bourse[train]'",
                      name=exc.name) from exc

from bourse.lightning.checkpoint import BourseCheckpoint, resume_path
from bourse.lightning.elastic import BourseElastic, per_device_batch, scaled_lr
from bourse.lightning.logger import BourseLogger

__all__ = ["BourseCheckpoint", "BourseElastic", "BourseLogger", "per_device_batch", "resume_path",
           "scaled_lr"]
