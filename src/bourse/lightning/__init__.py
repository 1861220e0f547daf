"""PyTorch Lightning integration: checkpoints in the job's object store, resumed on retry."""

from bourse.lightning.checkpoint import BourseCheckpoint, resume_path

__all__ = ["BourseCheckpoint", "resume_path"]
