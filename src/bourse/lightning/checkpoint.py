"""``BourseCheckpoint``: a Lightning callback that saves to ``BOURSE_CHECKPOINT_URI``.

It saves every ``every_n_epochs`` epochs, every ``every_n_train_steps`` steps and every
``every_n_minutes`` minutes (whichever are set), at the end of training, and when the job is
told to stop: Lightning's own SIGTERM handling finishes the current batch and raises
``SIGTERMException``, which reaches ``on_exception`` here; the trainer's state is saved then,
and the process exits with status 143 (128 + SIGTERM) so the exchange knows the work was
interrupted, not done. Each save writes the trainer's checkpoint locally, then uploads it as a
complete checkpoint — files first, completion marker last — so a job stopped mid-upload never
leaves a half-written "latest".

Resuming needs nothing more: when ``trainer.fit(model, ...)`` starts, the callback's ``setup``
looks for the newest complete checkpoint under the URI and, if there is one, has Lightning
restore it (model, optimizers, loops, callbacks) exactly as ``ckpt_path`` would — a first
attempt finds none and starts from scratch. A ``ckpt_path`` given to ``fit`` still wins.
A local run (no ``BOURSE_JOB_ID``) also watches its hand-over folder (``sdk.handover``): when
``bourse burst --here`` (or ``BourseElastic``) asks, it stops as on a SIGTERM — saves, then
says where (``handed.json``) — and exits 143, for a job on the exchange to go on from there.

``resume_path()`` downloads that checkpoint for scripts that pass ``ckpt_path`` themselves
(then the callback leaves it to them), or on Lightning versions whose internals the
automatic resume does not know (it warns then); without one, it finds the newest checkpoint
Lightning's own ``ModelCheckpoint`` saved in an earlier attempt's ``lightning_logs/``, which
the node keeps in the store: a script without the callback resumes with
``ckpt_path=resume_path()`` alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.utilities.exceptions import SIGTERMException

from bourse.lightning.elastic import submit_handed
from bourse.lightning.logs import download_newest
from bourse.sdk import handover
from bourse.storage.checkpoint import latest_complete, save_checkpoint
from bourse.storage.jobenv import CHECKPOINT_VAR, LIGHTNING_LOGS_VAR
from bourse.storage.remote import Stores
from bourse.storage.settings import StoreSettings

CHECKPOINT_FILE = "last.ckpt"
SIGTERM_EXIT = 143
_EXPLICIT: set[str] = set()  # URIs whose checkpoint a script fetched with resume_path()


def _opener() -> Stores:
    return Stores(StoreSettings.from_env(os.environ))


class BourseCheckpoint(L.Callback):
    """Save the trainer's state to the job's checkpoint URI (or ``uri``)."""

    def __init__(self, uri: str | None = None, every_n_epochs: int | None = 1,
                 every_n_train_steps: int | None = None, every_n_minutes: float | None = None,
                 save_on_sigterm: bool = True, *, resume: bool = True) -> None:
        super().__init__()
        for name, value in (("every_n_epochs", every_n_epochs),
                            ("every_n_train_steps", every_n_train_steps),
                            ("every_n_minutes", every_n_minutes)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive (or None), got {value!r}")
        self.uri = uri or os.environ.get("BOURSE_CHECKPOINT_URI")
        self.every_n_epochs, self.every_n_train_steps = every_n_epochs, every_n_train_steps
        self.every_n_minutes, self.save_on_sigterm = every_n_minutes, save_on_sigterm
        self.resume = resume
        self.resumed_from: str | None = None  # the checkpoint fit() resumed from, if any
        self.saved: list[str] = []
        self._last_save = time.monotonic()
        self._saved_step: int | None = None
        # a local run's hand-over folder (fixed where fit starts); whether it was asked
        self._control: Path | None = None
        self._handing = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Before ``fit`` restores anything: hand Lightning the newest complete checkpoint."""
        if stage == "fit" and self.uri and not os.environ.get("BOURSE_JOB_ID"):
            self._control = handover.control_dir()
        if stage != "fit" or not self.resume or not self.uri or self.uri in _EXPLICIT:
            return
        connector = getattr(trainer, "_checkpoint_connector", None)
        if connector is None or not callable(getattr(connector, "resume_start", None)):
            warnings.warn("BourseCheckpoint cannot resume by itself on this Lightning version: "
                          "pass ckpt_path=resume_path() to trainer.fit", stacklevel=2)
            return
        if getattr(connector, "_loaded_checkpoint", None):
            return  # something is already loaded
        path = asyncio.run(_download_latest(self.uri, Path(tempfile.mkdtemp(
            prefix="bourse-resume-"))))
        if path is None:
            return  # a first attempt
        # what fit(ckpt_path=...) does first; a path given to fit replaces it right after
        connector.resume_start(path)
        self.resumed_from = path
        print(f"bourse: resuming from the newest complete checkpoint under {self.uri}",
              flush=True)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._control is not None and not self._handing \
                and handover.requested(self._control) is not None:
            self._handing = True  # stop as a notice stops it: Lightning's SIGTERM path
            os.kill(os.getpid(), signal.SIGTERM)
        steps = self.every_n_train_steps
        due_steps = steps is not None and trainer.global_step % steps == 0
        minutes = self.every_n_minutes
        due_time = minutes is not None and time.monotonic() - self._last_save >= minutes * 60
        if due_steps or due_time:
            self.save(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        n = self.every_n_epochs
        if n is not None and (trainer.current_epoch + 1) % n == 0:
            self.save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save(trainer)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule,
                     exception: BaseException) -> None:
        if not isinstance(exception, SIGTERMException):
            return
        if self.save_on_sigterm or self._handing:
            self.save(trainer)
        if self._handing and self._control is not None and self.uri and trainer.is_global_zero:
            handed = handover.answer(self._control, self.uri, trainer.global_step, sys.argv,
                                     Path.cwd())
            print(f"bourse: handed over at step {handed.step}: {self.uri}", flush=True)
            submit_handed(self._control, handed)
        raise SIGTERMException(SIGTERM_EXIT) from exception  # interrupted, not finished

    def save(self, trainer: L.Trainer) -> None:
        """Upload the trainer's state now (once per step: a second save of a step is skipped).
        Every rank of a distributed run takes part (Lightning's ``save_checkpoint`` ends with a
        barrier); rank 0 writes and uploads, and the ranks meet again once it is uploaded."""
        if not self.uri or self._saved_step == trainer.global_step:
            return
        with tempfile.TemporaryDirectory(prefix="bourse-ckpt-") as tmp:
            trainer.save_checkpoint(Path(tmp) / CHECKPOINT_FILE)
            if trainer.is_global_zero:
                saved = asyncio.run(save_checkpoint(_opener(), Path(tmp), self.uri,
                                                    step=trainer.global_step))
                self.saved.append(saved.name)
        # no rank leaves before the upload is whole: a member stopped by a notice exits
        # right after, and its node reports the newest checkpoint (where a burst moved)
        trainer.strategy.barrier("bourse-checkpoint-uploaded")
        self._saved_step, self._last_save = trainer.global_step, time.monotonic()


def resume_path(uri: str | None = None, into: Path | None = None) -> str | None:
    """The newest complete checkpoint under ``uri`` (default ``BOURSE_CHECKPOINT_URI``),
    downloaded to a local file. Without ``uri`` and without such a checkpoint, the newest one
    Lightning saved by itself in an earlier attempt's ``lightning_logs/`` (which the node
    kept: ``BOURSE_LIGHTNING_LOGS_URI``, `bourse.lightning.logs`), so that a script that
    knows nothing of bourse resumes with ``ckpt_path=resume_path()``. None when there is none
    yet (a first attempt)."""
    given = uri
    uri = uri or os.environ.get(CHECKPOINT_VAR)
    into = into or Path(tempfile.mkdtemp(prefix="bourse-resume-"))
    if uri:
        _EXPLICIT.add(uri)
        found = asyncio.run(_download_latest(uri, into))
        if found is not None:
            return found
    kept = None if given else os.environ.get(LIGHTNING_LOGS_VAR)
    return asyncio.run(download_newest(_opener(), kept, into)) if kept else None


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
