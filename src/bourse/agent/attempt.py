"""Setting an attempt up, and reading how it ended: its directory and files, its environment
(never the agent's own, which holds credentials), and the ``exited`` event's data. Pure or
local-file work, used by :mod:`bourse.agent.runtime`."""

from __future__ import annotations

import os
import shutil
import signal
import tarfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bourse.agent.shim import AttemptDir
from bourse.core.errors import BourseError
from bourse.protocol.agent import StartJob

LOST_REASON = "exit status lost (agent restarted and the job's shim was killed)"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# Python writes stdout to a file (the shim's logs/stdout) in 8 KiB blocks: a job's prints
# would reach its log minutes late, and be lost whole when it is stopped, preempted or
# crashes. Unbuffered, each write reaches the file at once. A spec's env that sets
# PYTHONUNBUFFERED itself wins ("" buffers again: Python reads only a non-empty value).
JOB_DEFAULTS = {"PYTHONUNBUFFERED": "1"}


class StartError(BourseError):
    """Why an attempt could not be started; becomes the ``reason`` of ``start_failed``."""


def base_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables every job gets from the agent's environment (and nothing else of it)."""
    return {"PATH": environ.get("PATH", DEFAULT_PATH), "HOME": environ.get("HOME", "/"),
            "LANG": environ.get("LANG", "C.UTF-8")}


def job_env(base: Mapping[str, str], tmpdir: Path, msg: StartJob,
            data: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's environment: the base, its TMPDIR, the defaults (`JOB_DEFAULTS`), the spec's
    variables, its secrets, the data plane's (``BOURSE_INPUT_<NAME>``..., the attempt's
    scoped store key), then the exchange's and the devices it was given."""
    return {**base, "TMPDIR": str(tmpdir), **JOB_DEFAULTS, **msg.spec.env, **msg.secret_env,
            **(data or {}), **msg.env, **gpu_env(msg.gpus)}


def gpu_env(gpus: Sequence[str] | None) -> dict[str, str]:
    """The variables that show a job its devices and hide the others: CUDA (and everything
    built on it) sees only ``CUDA_VISIBLE_DEVICES``; ``NVIDIA_VISIBLE_DEVICES`` is what the
    NVIDIA container runtime reads, in a container the job starts or an image that sets it
    (``void``: none, not even the driver's libraries). A job given none sees none: a CPU job
    on a GPU node must not take a GPU another attempt was given. ``None`` (an older
    coordinator that assigns nothing): nothing is set, the job sees every GPU."""
    if gpus is None:
        return {}
    listed = ",".join(gpus)
    return {"CUDA_VISIBLE_DEVICES": listed, "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "NVIDIA_VISIBLE_DEVICES": listed or "void"}


def exit_info(file_status: int | None, wait_status: int | None,
              cancel_reason: str | None) -> dict[str, Any]:
    """The ``exited`` event's data from what is known: the status the shim wrote (sh reports a
    job killed by signal n as 128+n), else the shim's own wait status, else nothing."""
    code: int | None = None
    sig: int | None = None
    if file_status is not None:
        code = file_status
    elif wait_status is not None and os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
    elif wait_status is not None:
        code = os.WEXITSTATUS(wait_status)
    return {"exit_code": code, "signal": sig, "reason": cancel_reason or _describe(code, sig)}


def _describe(code: int | None, sig: int | None) -> str:
    if code is not None:
        return f"exited with code {code}"
    if sig is not None:
        return f"killed by {signal.Signals(sig).name}"
    return LOST_REASON


def resolve_workdir(work: Path, workdir: str) -> Path:
    root = work.resolve()
    if workdir in ("", "."):  # the job's files themselves, just made: one path walk, not three
        return root
    cwd = (root / workdir).resolve()
    if not cwd.is_relative_to(root):
        raise StartError(f"workdir {workdir!r} points outside the job's files")
    if not cwd.is_dir():
        raise StartError(f"workdir {workdir!r} does not exist in the job's files")
    return cwd


def extract_bundle(bundle: Path, dest: Path) -> None:
    try:
        with tarfile.open(bundle, "r:gz") as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise StartError(f"cannot extract the code bundle: {e}") from e


def prepare(adir: AttemptDir, msg: StartJob, bundle: Path | None,
            setup: Callable[[AttemptDir], None] | None = None) -> Path:
    """Create the attempt's directory and put the job's files in; returns the job's cwd.
    ``setup`` runs once the directory exists, before the files go in (the isolation's users
    and mounts).

    A directory already there belongs to no recorded attempt (the spool was lost): it goes."""
    if adir.root.exists():
        shutil.rmtree(adir.root)
    adir.create()
    if setup is not None:
        setup(adir)
    if bundle is not None:
        extract_bundle(bundle, adir.work)
    elif msg.spec.bundle is not None:
        raise StartError(f"the code bundle {msg.spec.bundle} was not provided to the agent")
    return resolve_workdir(adir.work, msg.spec.workdir)
