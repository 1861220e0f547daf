"""What the agent keeps of a job that did not ask it to: the ``lightning_logs/`` directory
PyTorch Lightning writes in its working directory (its checkpoints, TensorBoard events,
hparams), which would otherwise go with the attempt's directory.

When an attempt ends — succeeded, failed, cancelled or preempted: whenever the data plane's
``finish`` runs — the directory goes up below ``<DataPlan.lightning_logs><attempt>/`` (one
folder per attempt: each starts again at ``version_0``), and the ``exited`` event lists the
job's prefix in ``kept``, which the exchange adds to the job's outputs. It is best effort: a
failed upload is said on the job's timeline, never the job's failure. Links in it are
skipped (a root agent uploads what a job user left). Without a place in the store — no data
plan (the exchange has no store, or the job names no data and cannot run on spot), or an
older coordinator — the timeline says it was not kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bourse.agent.attempt import StartError, resolve_workdir
from bourse.agent.shim import AttemptDir
from bourse.core.uri import parse_uri
from bourse.protocol.agent import StartJob
from bourse.storage.errors import StorageError
from bourse.storage.jobenv import LIGHTNING_LOGS
from bourse.storage.progress import Progress, format_bytes
from bourse.storage.store import Opener
from bourse.storage.upload import UploadOptions, upload

NO_STORE = (f"{LIGHTNING_LOGS}/ was not kept: the job had no place in the exchange's store "
            "(the exchange has none, or the job names no data and does not run on spot; "
            "a --checkpoint, an --output or --spot prefer gives it one: docs/spot.md)")
NO_PLACE = (f"{LIGHTNING_LOGS}/ was not kept: the exchange named no place for it (an older "
            f"coordinator, or the job names an output {LIGHTNING_LOGS} of its own)")


def lightning_logs(msg: StartJob, adir: AttemptDir) -> Path | None:
    """The ``lightning_logs/`` directory in the job's working directory, if it left one."""
    try:
        cwd = resolve_workdir(adir.work, msg.spec.workdir)
    except (StartError, OSError):
        return None  # the job moved its working directory away: nothing of it is followed
    found = cwd / LIGHTNING_LOGS
    return found if found.is_dir() and not found.is_symlink() else None


def not_kept(emit: Callable[[str, dict[str, Any]], None], *, stored: bool) -> None:
    """Says on the timeline why the job's ``lightning_logs/`` goes (``stored``: the attempt
    had store access, but no place for it)."""
    emit("info", {"step": LIGHTNING_LOGS, "text": NO_PLACE if stored else NO_STORE})


async def keep(opener: Opener, source: Path, prefix: str, attempt: int, *,
               options: UploadOptions, emit: Callable[[str, dict[str, Any]], None],
               report: Callable[[Progress], None] | None = None) -> dict[str, Any]:
    """Upload ``source`` below ``prefix<attempt>/``: the ``exited`` event's ``kept`` entry,
    or nothing when it could not be uploaded (the timeline says why)."""
    dest = parse_uri(prefix, field="lightning_logs").as_prefix().join(f"{attempt}/")
    try:
        done = await upload(opener, source, dest, on_progress=report,
                            options=replace(options, follow_links=False))
    except StorageError as exc:
        emit("info", {"step": LIGHTNING_LOGS,
                      "text": f"{LIGHTNING_LOGS}/ could not be kept: {exc.message}"})
        return {}
    emit("info", {"step": LIGHTNING_LOGS, "uri": str(dest), "objects": len(done.objects),
                  "bytes": done.bytes,
                  "text": f"{LIGHTNING_LOGS}/ kept: {len(done.objects)} file(s), "
                          f"{format_bytes(done.bytes)} at {dest}"})
    return {"kept": {LIGHTNING_LOGS: prefix}}
