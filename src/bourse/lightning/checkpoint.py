"""``BourseCheckpoint``: a Lightning callback that saves to ``BOURSE_CHECKPOINT_URI``.

Every ``every_n_epochs`` epochs (and at the end of training) the trainer's checkpoint is
written locally, then uploaded as a complete checkpoint — files first, completion marker last
— so a job stopped mid-upload never leaves a half-written "latest". ``resume_path()`` finds the
newest complete checkpoint and downloads it, for ``trainer.fit(..., ckpt_path=...)``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import lightning as L

from bourse.storage.checkpoint import latest_complete, save_checkpoint
from bourse.storage.remote import Stores
from bourse.storage.settings import StoreSettings

CHECKPOINT_FILE = "last.ckpt"


def _opener() -> Stores:
    return Stores(StoreSettings.from_env(os.environ))


class BourseCheckpoint(L.Callback):
    """Save the trainer's state to the job's checkpoint URI (or ``uri``)."""

    def __init__(self, uri: str | None = None, every_n_epochs: int = 1) -> None:
        super().__init__()
        self.uri = uri or os.environ.get("BOURSE_CHECKPOINT_URI")
        self.every_n_epochs = max(1, every_n_epochs)
        self.saved: list[str] = []

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.uri and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self.save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.uri and f"step-{trainer.global_step}" not in self.saved:
            self.save(trainer)

    def save(self, trainer: L.Trainer) -> None:
        assert self.uri is not None
        with tempfile.TemporaryDirectory(prefix="bourse-ckpt-") as tmp:
            trainer.save_checkpoint(Path(tmp) / CHECKPOINT_FILE)
            saved = asyncio.run(save_checkpoint(_opener(), Path(tmp), self.uri,
                                                step=trainer.global_step))
        self.saved.append(saved.name)


def resume_path(uri: str | None = None, into: Path | None = None) -> str | None:
    """The newest complete checkpoint under ``uri`` (default ``BOURSE_CHECKPOINT_URI``),
    downloaded to a local file; None when there is none yet."""
    uri = uri or os.environ.get("BOURSE_CHECKPOINT_URI")
    if not uri:
        return None
    return asyncio.run(_download_latest(uri, into or Path(tempfile.mkdtemp())))


async def _download_latest(uri: str, into: Path) -> str | None:
    opener = _opener()
    latest = await latest_complete(opener, uri)
    if latest is None:
        return None
    target = into / CHECKPOINT_FILE
    key = latest.uri.join(CHECKPOINT_FILE).key
    store = opener(latest.uri)
    target.write_bytes(bytes(await store.get(key)))
    return str(target)


