"""The scalars of the TensorBoard event files a job left in its working directory, imported
into its tracking run by the agent when the job's process has ended, so an old script that
logs only to TensorBoard (Lightning's default logger, torch's ``SummaryWriter``) has curves on
its run too, unchanged.

They are appended to the attempt's track file as ``bourse.track`` records (the job has ended:
nothing else writes it), which the tailer then spools as it spools the job's own. Each scalar
is a metric named by its tag, at its step and wall time. Once per attempt: a marker beside the
track file is written first, so a restarted agent never imports twice (at the price of an
import cut short by a crash staying short). Bounded: the working directory is walked
``MAX_DEPTH`` deep and at most ``MAX_ENTRIES`` entries, at most ``MAX_BYTES`` of event files are
read and ``MAX_POINTS`` scalars imported; only regular files are opened (never a link, a FIFO
or a device the job left in their place), and a file that cannot be read or parsed is skipped,
never the attempt's end.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bourse.agent.attempt import StartError, resolve_workdir
from bourse.agent.shim import AttemptDir
from bourse.agent.track import track_file
from bourse.core.tfevents import Scalar, scalars
from bourse.protocol.agent import StartJob
from bourse.protocol.track import TrackRecord
from bourse.track.writer import clean

log = logging.getLogger(__name__)

EVENTS = "events.out.tfevents."
MAX_DEPTH = 4
MAX_ENTRIES = 20_000
MAX_BYTES = 64 * 1024 * 1024  # the CRC-32C in Python reads about 8 MiB/s
MAX_POINTS = 500_000
PER_RECORD = 1000  # points per record: a log-batch's
MAX_KEY = 250
MARKER = ".tensorboard-imported"


@dataclass(frozen=True)
class Imported:
    files: int
    points: int
    truncated: bool  # a bound was reached: some files were not read


def event_files(root: Path) -> tuple[list[Path], bool]:
    """The event files under ``root`` (links not followed), in path order, and whether the
    walk stopped at a bound."""
    found: list[Path] = []
    seen, total = 0, 0
    for top, dirs, files in os.walk(root, followlinks=False):
        depth = len(Path(top).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirs.clear()
        dirs.sort()
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            return sorted(found), True
        for name in sorted(files):
            path = Path(top) / name
            if not name.startswith(EVENTS):
                continue
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                continue  # a link, a FIFO, a device: never opened
            total += info.st_size
            if total > MAX_BYTES:
                return sorted(found), True
            found.append(path)
    return sorted(found), False


def regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """An fd of ``path`` opened only if it is a regular file, never through a link, and
    without waiting (a FIFO a job swapped in after the walk would block an open for ever)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def read(path: Path) -> bytes:
    """The file's bytes (at most ``MAX_BYTES``), a regular file only."""
    with os.fdopen(regular(path, os.O_RDONLY), "rb") as f:
        return f.read(MAX_BYTES)


def records(points: Iterable[Scalar]) -> Iterator[TrackRecord]:
    """The scalars as track records of at most ``PER_RECORD`` points (values as
    ``bourse.track`` writes them: ``clean``; a tag too long for a key is left out)."""
    batch: list[tuple[str, float | None, int, int]] = []
    for s in points:
        if not 0 < len(s.tag) <= MAX_KEY or not -(2**63) <= s.step < 2**63:
            continue
        wall = s.wall_time * 1000
        batch.append((s.tag, clean(s.value), s.step,
                      int(wall) if math.isfinite(wall) and 0 <= wall < 2**62 else 0))
        if len(batch) == PER_RECORD:
            yield TrackRecord(metrics=batch)
            batch = []
    if batch:
        yield TrackRecord(metrics=batch)


def import_once(workdir: Path, track: Path) -> Imported | None:
    """Append the event files' scalars under ``workdir`` to ``track``; None when this attempt
    imported already, or left no event file."""
    marker = track.with_name(track.name + MARKER)
    if marker.exists() or not workdir.is_dir():
        return None
    files, truncated = event_files(workdir)
    if not files:
        return None
    try:  # never through a link the job left there
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        return None
    points, read_files = 0, 0
    with os.fdopen(regular(track, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as out:
        out.write(b"\n")  # after a last line the job left without its newline
        for path in files:
            if points >= MAX_POINTS:
                truncated = True
                break
            try:
                found = list(records(scalars(read(path))))
            except Exception as exc:  # a file that is not what its name says: skipped
                log.warning("TensorBoard file %s not imported: %s", path, exc)
                continue
            read_files += 1
            for record in found:
                points += len(record.metrics)
                out.write(record.model_dump_json().encode() + b"\n")
    return Imported(read_files, points, truncated)


async def import_after(msg: StartJob, adir: AttemptDir,
                       emit: Callable[[str, dict[str, Any]], None]) -> None:
    """Import the event files of the ended attempt's working directory, and say so on its
    timeline; a failure is logged, never the job's."""
    try:
        cwd = resolve_workdir(adir.work, msg.spec.workdir)
        done = await asyncio.to_thread(import_once, cwd, track_file(adir))
    except (StartError, OSError) as exc:
        log.warning("TensorBoard files of %s not imported: %s", adir.root, exc)
        return
    except Exception:  # never the attempt's end: it is reported whatever happens here
        log.exception("importing the TensorBoard files of %s failed", adir.root)
        return
    if done is not None:
        more = "; some were left out (too many files or bytes)" if done.truncated else ""
        emit("info", {"text": f"imported {done.points} TensorBoard scalar(s) from "
                              f"{done.files} event file(s) into the run{more}"})
