"""Job users: the unprivileged uids attempts run as when the agent is root.

A uid is taken from a reserved range (`FIRST_UID` .. `FIRST_UID + UID_COUNT - 1`, gid equal to
the uid) rather than from a pool of ``useradd`` accounts: nothing is written to
``/etc/passwd``, nothing depends on the distribution's user tools, and nothing is left to
clean up. The range sits far above login users (< 60000), systemd's dynamic users
(61184-65519) and the usual subordinate-id ranges of user namespaces (100000 + 65536 per
user). A job that asks who it is (``getpwuid``) gets no name; its ``USER``, ``LOGNAME`` and
``HOME`` are set instead (what ``getpass.getuser()`` and ``~`` read first).

Claims are files named by uid in a host-wide directory (`CLAIMS`, under ``/run``, so a reboot
forgets them as it forgets the processes), each holding the attempt directory that owns the
uid, so that every agent on the node (several may run on one machine) shares one pool and a
uid is never held by two running attempts. A claim whose attempt directory is gone is free.
Before a uid is handed out, and when its attempt ends, every process of it is killed (from a
helper that becomes the uid and sends ``kill(-1, SIGKILL)``, which reaches even processes
that left the job's process group) and what it left in the shared temporary directories is
removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bourse.agent.attempt import StartError

log = logging.getLogger(__name__)

FIRST_UID = 2_000_000_000
UID_COUNT = 4096
CLAIMS = Path("/run/bourse/job-users")
SHARED_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))

# Runs as root, becomes the job user (no supplementary groups, umask 077) and execs the
# command; 127/126 as a shell would say for a command it cannot find or run. ``-I -S``: the
# job's PYTHON* variables and site-packages do not reach it. Everything it imports is imported
# before it drops (``execvp`` imports ``warnings``): the job user may not read the stdlib.
_DROP = """\
import os, sys, warnings
os.setgroups([]); os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1])); os.umask(0o77)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write(f"{sys.argv[2]}: {e.strerror}\\n")
    os._exit(127 if isinstance(e, FileNotFoundError) else 126)
"""
_KILL = """\
import os, signal, sys
os.setgroups([]); os.setgid(int(sys.argv[1])); os.setuid(int(sys.argv[1]))
try:
    os.kill(-1, signal.SIGKILL)
except ProcessLookupError:
    pass
"""


@dataclass(frozen=True)
class JobUser:
    uid: int

    @property
    def gid(self) -> int:
        return self.uid

    @property
    def name(self) -> str:
        return f"bourse-job-{self.uid - FIRST_UID}"

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run as this user (the wrapper starts as root and drops to it)."""
        return [sys.executable, "-I", "-S", "-c", _DROP, str(self.uid), *argv]

    def env(self, home: Path) -> dict[str, str]:
        return {"HOME": str(home), "USER": self.name, "LOGNAME": self.name}


class UidPool:
    def __init__(self, claims: Path = CLAIMS, first: int = FIRST_UID,
                 count: int = UID_COUNT) -> None:
        self.claims, self.first, self.count = claims, first, count

    def owns(self, uid: int) -> bool:
        return self.first <= uid < self.first + self.count

    def claim(self, owner: Path) -> JobUser:
        """A uid no running attempt holds, now held by ``owner`` (an attempt directory)."""
        with self._locked():
            for uid in range(self.first, self.first + self.count):
                if self._holder(uid) in (None, str(owner)):
                    user = JobUser(uid)
                    clear(user)  # nothing a previous holder left may reach the next one
                    self._write(uid, str(owner))
                    return user
        raise StartError(f"all {self.count} job users of this node are in use",
                         hint="wait for attempts to end, or run fewer at once")

    def release(self, user: JobUser, owner: Path) -> None:
        with self._locked():
            if self._holder(user.uid) == str(owner):
                (self.claims / str(user.uid)).unlink(missing_ok=True)

    def _holder(self, uid: int) -> str | None:
        """The attempt directory holding ``uid``; None when free (or its holder is gone)."""
        try:
            owner = (self.claims / str(uid)).read_text()
        except FileNotFoundError:
            return None
        return owner if Path(owner).exists() else None

    def _write(self, uid: int, owner: str) -> None:
        tmp = self.claims / f".{uid}.tmp"
        tmp.write_text(owner)
        os.replace(tmp, self.claims / str(uid))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.claims.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.claims / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def clear(user: JobUser) -> None:
    """Kill every process of ``user`` and remove what it left in the shared temp dirs."""
    kill_all(user.uid)
    for folder in SHARED_TMP:
        remove_owned(folder, user.uid)


def kill_all(uid: int, tries: int = 50) -> None:
    for _ in range(tries):
        if not processes_of(uid):
            return
        subprocess.run([sys.executable, "-I", "-S", "-c", _KILL, str(uid)], check=False,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        time.sleep(0.01)
    log.error("processes of job user %s survive SIGKILL: %s", uid, processes_of(uid))


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose real, effective or saved uid is ``uid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _runs_as(entry / "status", uid):
            found.append(int(entry.name))
    return found


def _runs_as(status: Path, uid: int) -> bool:
    try:
        lines = status.read_text().splitlines()
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    ids = fields.get("Uid", "").split()[:3]
    return str(uid) in ids and not fields.get("State", "").strip().startswith(("Z", "X"))


def remove_owned(folder: Path, uid: int) -> None:
    """Remove the entries of ``folder`` that ``uid`` owns (not those of others below it)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
