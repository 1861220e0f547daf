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
When its process ends and when its attempt ends, every process of the uid is killed (a scan
of ``/proc`` finds them; a helper that becomes the uid sends ``kill(-1, SIGKILL)``, which
reaches even processes that left the job's process group), and what it left in the shared
temporary directories is removed once the attempt ends. A uid whose claim was released went
through that already; one whose claim is stale (its agent died first) is cleared again before
it is handed out, with a kill sent even if the scan finds nothing (a setuid program the uid
started runs under another effective uid: the scan misses it, the kill does not).

The drop to the uid is util-linux's ``setpriv`` where the node has it (about 2 ms per start;
a Python wrapper, the fallback, costs 13 ms of CPU and 45 ms of wall time on a loaded 2-core
machine), with a ``sh`` that sets the umask.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
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
SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
_UMASK = 'umask 077 && exec "$@"'

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
        if SETPRIV is None:
            return [sys.executable, "-I", "-S", "-c", _DROP, str(self.uid), *argv]
        return self._setpriv("/bin/sh", "-c", _UMASK, "sh", *argv)

    def killer(self) -> list[str]:
        """A command that, run as root, sends SIGKILL to every process of this user."""
        if SETPRIV is None:
            return [sys.executable, "-I", "-S", "-c", _KILL, str(self.uid)]
        return self._setpriv("/bin/kill", "-9", "-1")

    def _setpriv(self, *argv: str) -> list[str]:
        assert SETPRIV is not None
        return [SETPRIV, "--reuid", str(self.uid), "--regid", str(self.gid), "--clear-groups",
                "--", *argv]

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
                claim = self.claims / str(uid)
                if self._holder(uid) in (None, str(owner)):
                    user = JobUser(uid)
                    if claim.exists():  # stale: nothing its holder left may reach the next one
                        clear(user, surely=True)
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


def clear(user: JobUser, *, surely: bool = False, since_ns: int | None = None) -> None:
    """Kill every process of ``user`` and remove what it left in the shared temp dirs.

    ``since_ns``: when the user's job started (the shim's pid file's mtime). A temp dir not
    modified since holds nothing of it — an entry the user owns was created (or renamed) there
    by it, which changes the folder's mtime — so it is not scanned (a busy /tmp of thousands of
    entries cost ms per attempt)."""
    kill_all(user, surely=surely)
    for folder in SHARED_TMP:
        if since_ns is None or _modified_since(folder, since_ns):
            remove_owned(folder, user.uid)


def _modified_since(folder: Path, since_ns: int) -> bool:
    try:
        return os.stat(folder).st_mtime_ns >= since_ns
    except OSError:
        return False


def kill_all(user: JobUser, *, surely: bool = False, tries: int = 50) -> None:
    """SIGKILL every process of ``user`` while a scan finds one (a process may fork
    meanwhile). ``surely``: send it once even when the scan finds none, for what a scan cannot
    see — a setuid program the user started runs under another effective uid, yet it is the
    user's to kill; that costs a process start (~3 ms), so it is done for a uid whose last
    holder's agent died, not after every attempt (docs/security.md)."""
    killer = user.killer()
    for attempt in range(tries):
        if not (surely and attempt == 0) and not processes_of(user.uid):
            return
        os.waitpid(os.posix_spawn(killer[0], killer, {}), 0)
        time.sleep(0.01 if attempt else 0)
    log.error("processes of job user %s survive SIGKILL: %s", user.uid, processes_of(user.uid))


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes running as ``uid`` (a ``/proc/<pid>`` belongs to its
    process's effective uid: one stat each, where reading every status file cost ~17 ms)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_uid == uid and _live(entry.path):
                found.append(int(entry.name))
    return found


def _live(proc: str) -> bool:
    try:
        raw = Path(proc, "stat").read_bytes()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2:][:1] not in (b"Z", b"X")


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
