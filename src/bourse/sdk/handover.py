"""A local run handed over to the exchange (``bourse burst --here``): the handshake and the job.

The handshake is two files in the run's control folder, ``BOURSE_BURST_DIR`` or
``.bourse/burst/`` in the folder the run was started in, each written whole (a temporary
file renamed):

1. ``bourse burst --here`` writes ``request.json`` (the Compute, why, when).
2. The run's ``BourseCheckpoint`` sees it at the end of its next batch (one ``stat`` a batch),
   stops as on a SIGTERM — it saves its state to its checkpoint prefix in the exchange's
   store — writes ``handed.json`` (the checkpoint, the step, its command line and folder) and
   exits 143. It acts once per request: the request is removed when the run has answered.
3. ``bourse burst --here`` reads ``handed.json``, packs the run's folder as a code bundle and
   submits a job with the Compute, the same checkpoint prefix and the same command: its
   first attempt resumes from that checkpoint (``BourseCheckpoint`` looks there first).

A plain PyTorch loop does step 2 itself with :class:`Watch`. No network call and no
coordinator is involved until step 3, so a run started with plain
``python train.py`` (or ``bourse run --local``) needs only the callback and a checkpoint
prefix in the exchange's store (``BOURSE_CHECKPOINT_URI=s3://...`` with store credentials,
e.g. from ``bourse cp``'s grant, docs/burst.md).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.protocol.common import JobSpec

DIR_VAR = "BOURSE_BURST_DIR"
REQUEST, HANDED = "request.json", "handed.json"


def control_dir(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """The run's control folder: ``BOURSE_BURST_DIR``, else ``.bourse/burst`` in ``cwd``."""
    environ = os.environ if environ is None else environ
    given = environ.get(DIR_VAR)
    return Path(given) if given else (cwd or Path.cwd()) / ".bourse" / "burst"


@dataclass(frozen=True)
class Request:
    compute: dict[str, Any] | None  # None: the callback's own target (BourseElastic)
    reason: str
    at: float


@dataclass(frozen=True)
class Handed:
    checkpoint: str  # the prefix the run saved to, in the exchange's store
    step: int
    argv: list[str]  # the run's command line, as sys.argv (the script first)
    cwd: str
    at: float


def _write(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value))
    partial.replace(path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path} is not a burst handshake file ({exc})",
                           hint="remove it and ask again") from None
    if not isinstance(found, dict):
        raise InvalidInput(f"{path} is not a burst handshake file", hint="remove it")
    return found


def request(folder: Path, compute: Compute | None, reason: str) -> Request:
    """Ask the run watching ``folder`` to hand itself over (an older answer is removed)."""
    (folder / HANDED).unlink(missing_ok=True)
    made = Request(None if compute is None else compute.model_dump(mode="json"), reason,
                   time.time())
    _write(folder / REQUEST, asdict(made))
    return made


def requested(folder: Path) -> Request | None:
    """The request waiting in ``folder``, if any (a ``stat`` when there is none)."""
    if not (folder / REQUEST).exists():
        return None
    found = _read(folder / REQUEST)
    return None if found is None else Request(found.get("compute"), str(found.get("reason")),
                                              float(found.get("at") or 0))


def answer(folder: Path, checkpoint: str, step: int, argv: Sequence[str], cwd: Path) -> Handed:
    """The run's answer: where it saved. The request is done with."""
    handed = Handed(checkpoint, step, list(argv), str(cwd), time.time())
    _write(folder / HANDED, asdict(handed))
    (folder / REQUEST).unlink(missing_ok=True)
    return handed


class Watch:
    """A plain training loop's side of the handshake (what ``BourseCheckpoint`` does for
    Lightning): ``asked()`` once a step — a ``stat`` — and, once it has saved its checkpoint
    to its prefix in the exchange's store, ``handed(uri, step)`` before it exits. Inert in a
    job on the exchange (``BOURSE_JOB_ID`` set): a burst reaches a job as a notice, SIGTERM."""

    def __init__(self, environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.folder = None if environ.get("BOURSE_JOB_ID") else control_dir(environ, cwd)

    def asked(self) -> bool:
        """Whether ``bourse burst --here`` asks this run to hand itself over."""
        return self.folder is not None and requested(self.folder) is not None

    def handed(self, checkpoint: str, step: int) -> Handed:
        """Say where the run saved (``checkpoint``, at ``step``); then it should exit."""
        if self.folder is None:
            raise InvalidInput("a job on the exchange hands over through its notice, not "
                               "handed()", hint="call handed() only when asked() said so")
        return answer(self.folder, checkpoint, step, sys.argv, Path.cwd())


def wait_handed(folder: Path, timeout_s: float, poll_s: float = 0.1) -> Handed:
    """The run's answer, once it has saved and left; a clear error when none comes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _read(folder / HANDED)
        if found is not None:
            return Handed(str(found["checkpoint"]), int(found["step"]),
                          [str(a) for a in found["argv"]], str(found["cwd"]),
                          float(found["at"]))
        time.sleep(poll_s)
    (folder / REQUEST).unlink(missing_ok=True)
    raise InvalidInput(f"no run answered in {folder} within {timeout_s:g} s: nothing was moved",
                       field="--here",
                       hint="run this in the folder the training was started in (or set "
                            f"{DIR_VAR} as the run has it); the run needs BourseCheckpoint "
                            "with a checkpoint prefix in the exchange's store")


def job_spec(handed: Handed, compute: Compute, bundle: str | None,
             python: str = "python") -> JobSpec:
    """The job that goes on from the handed-over checkpoint: the same command, the bundle
    of the run's folder, the same checkpoint prefix (which must be in the store)."""
    if not handed.checkpoint.startswith("s3://"):
        raise InvalidInput(f"the run saved to {handed.checkpoint}, which a node cannot read",
                           field="checkpoint",
                           hint="start it with BOURSE_CHECKPOINT_URI=s3://BUCKET/PREFIX/ in "
                                "the exchange's store (`bourse ls` shows your home)")
    argv = list(handed.argv)
    script = Path(argv[0]) if argv else Path()
    if script.is_absolute() and script.is_relative_to(handed.cwd):  # a path in the bundle
        argv[0] = str(script.relative_to(handed.cwd))
    return JobSpec(command=[python, *argv], compute=compute, bundle=bundle,
                   checkpoint=handed.checkpoint, name=script.stem[:200] or None)
