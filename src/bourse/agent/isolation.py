"""Isolation of attempts on the node: who a job runs as, who may read its files, and what is
left of it once it ended.

Which mode the agent runs in is decided once at start (:func:`decide`, a pure function of the
``--job-users`` setting, the agent's euid and whether job users could reach the work dir):

- **job users** (root, and the default ``auto`` where possible): each attempt runs as its own
  uid (:mod:`bourse.agent.users`), no supplementary groups, umask 077. Its directory is
  ``root:<job gid> 0750`` (the job can enter it, not write it: logs, ``pid``, ``exit`` and
  ``beside.json`` stay the agent's), its ``work/`` and ``tmp/`` (also its ``HOME``) are the
  job's, 0700, and its outputs are handed to it. When the process has ended every process of
  the uid is killed, symlinks the job left among its outputs are dropped (the agent uploads
  them as root: a link to the agent's credential must not be followed); once the final
  event is spooled all of the attempt directory but its logs is removed and the uid released,
  and the logs go once the coordinator has acknowledged them (the spool reads log chunks
  from those files when it sends them: `Runtime.sweep`). The work
  dir becomes 0711 (jobs can reach their own attempt by path, list nothing) and the agent's
  state in it (spool, credential, bundles, input cache) is the agent's alone; job
  environments stay readable and executable, not writable.
- **shared user** (not root, ``off``, or a work dir job users cannot reach): as before, jobs
  run as the agent's user. The agent says once, at start, what that does not guarantee.

``--tmpfs-work-dir SIZE`` (root only) mounts a tmpfs on each attempt's ``work/`` and ``tmp/``,
so that what a job writes there never reaches a disk; both are unmounted at the attempt's end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bourse.agent.attempt import StartError
from bourse.agent.shim import AttemptDir
from bourse.agent.users import JobUser, UidPool, clear, kill_all
from bourse.core.errors import InvalidInput

log = logging.getLogger(__name__)

MODES = ("auto", "on", "off")
TMPFS_SIZE = re.compile(r"^[1-9][0-9]*[kmgKMG]?$")
SHARED_USER_GAPS = (
    "jobs run as the agent's user: a job can read the files of other jobs and of the agent "
    "(its spool holds attempts' store keys) and signal their processes",
    "attempt directories are kept after the attempt ends (no wipe of the job's files)",
)
AGENT_STATE = ("bundles", "cache", "spool.db", "spool.db-wal", "spool.db-shm", "node.json",
               "agent.log")


@dataclass(frozen=True)
class Decision:
    job_users: bool
    reason: str  # why, in words, for the start-up log line
    gaps: tuple[str, ...] = ()  # guarantees the agent cannot give


def decide(mode: str, euid: int, reachable: str | None) -> Decision:
    """``reachable``: None when job users can reach the work dir, else why they cannot."""
    if mode not in MODES:
        raise InvalidInput(f"must be one of {', '.join(MODES)}, not {mode!r}",
                           field="--job-users")
    if mode == "off":
        return Decision(False, "--job-users off", SHARED_USER_GAPS)
    why = "the agent is not root" if euid != 0 else reachable
    if why is None:
        return Decision(True, "the agent is root")
    if mode == "on":
        raise InvalidInput(f"'on' cannot be honoured: {why}", field="--job-users",
                           hint="run the agent as root with a work dir outside any private "
                                "home (e.g. --work-dir /var/lib/bourse/agent)")
    return Decision(False, why, SHARED_USER_GAPS)


def unreachable(path: Path, what: str = "the work dir") -> str | None:
    """Why a user other than the owner cannot reach ``path`` (a folder above it they cannot
    enter), or None."""
    for folder in path.resolve().parents:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return f"job users cannot enter {folder}, above {what} {path}"
    return None


def check_tmpfs(size: str | None, euid: int) -> None:
    if size is None:
        return
    if not TMPFS_SIZE.match(size):
        raise InvalidInput(f"{size!r} is not a size", field="--tmpfs-work-dir",
                           hint="a number of bytes with an optional k, m or g, e.g. 8g")
    if euid != 0:
        raise InvalidInput("needs the agent to run as root (it mounts a tmpfs for "
                           "each attempt)", field="--tmpfs-work-dir",
                           hint="run the agent as root, or leave the option out")


@dataclass
class Isolation:
    """What the runtime does around each attempt; the default isolates nothing."""

    pool: UidPool | None = None  # None: jobs run as the agent's user
    tmpfs: str | None = None  # size of the tmpfs on work/ and tmp/
    gaps: tuple[str, ...] = field(default=())

    @property
    def wipes(self) -> bool:
        return self.pool is not None or self.tmpfs is not None

    def secure(self, work_dir: Path) -> None:
        """The agent's work dir: reachable (not listable) by job users, its state not."""
        if self.pool is None:
            return
        os.chmod(work_dir, 0o711)
        (work_dir / "bundles").mkdir(mode=0o700, exist_ok=True)
        for name in AGENT_STATE:
            path = work_dir / name
            with contextlib.suppress(FileNotFoundError):
                os.chmod(path, 0o700 if path.is_dir() else 0o600)

    def setup(self, adir: AttemptDir) -> None:
        """Once the attempt's directory exists, before its files go in: its user, modes and
        mounts."""
        user = self.pool.claim(adir.root) if self.pool is not None else None
        if user is not None:
            for folder in (adir.root.parent, adir.root.parent.parent):  # jobs/, jobs/<id>/
                os.chmod(folder, 0o711)
            os.chown(adir.root, 0, user.gid)
            os.chmod(adir.root, 0o750)
            os.chmod(adir.stdout.parent, 0o700)
            for folder in (adir.work, adir.tmp):
                os.chown(folder, user.uid, user.gid)
                os.chmod(folder, 0o700)
        if self.tmpfs is not None:
            owner = user or JobUser(0)
            for folder in (adir.work, adir.tmp):
                mount_tmpfs(folder, self.tmpfs, owner)

    def user_of(self, adir: AttemptDir) -> JobUser | None:
        """The attempt's job user (the owner of its ``work/``), or None."""
        if self.pool is None:
            return None
        try:
            uid = os.stat(adir.work).st_uid
        except OSError:
            return None
        return JobUser(uid) if self.pool.owns(uid) else None

    def hand_over(self, adir: AttemptDir) -> JobUser | None:
        """Just before the job starts: what the agent put in its folders becomes the job's."""
        user = self.user_of(adir)
        if user is not None:
            for folder in (adir.work, adir.tmp, adir.root / "outputs"):
                chown_tree(folder, user)
        return user

    def stop(self, adir: AttemptDir) -> None:
        """The job's process has ended: nothing of its user may run on, nor leave a link
        among its outputs for the agent to follow."""
        user = self.user_of(adir)
        if user is not None:
            kill_all(user)  # its files in the shared temp dirs go when the attempt ends
            drop_links(adir.root / "outputs")

    def end(self, root: Path) -> None:
        """The attempt is over (its final event is spooled): wipe all of it but its logs
        (the spool reads log chunks from them until the coordinator acknowledged them), and
        release its user."""
        if not self.wipes or not root.exists():
            return
        adir = AttemptDir(root)
        user = self.user_of(adir)
        if user is not None:
            clear(user, since_ns=_started_ns(adir))
        for folder in (adir.work, adir.tmp):
            unmount(folder)
        for entry in root.iterdir():
            if entry != adir.stdout.parent:
                _remove(entry)
        os.chown(root, 0, 0)
        os.chmod(root, 0o700)
        if user is not None and self.pool is not None:
            self.pool.release(user, root)

    def forget(self, root: Path) -> None:
        """Its logs are acknowledged too: nothing of the attempt is left."""
        if self.wipes:
            shutil.rmtree(root, ignore_errors=True)
            with contextlib.suppress(OSError):  # jobs/<id>/, once its last attempt is gone
                root.parent.rmdir()


def _started_ns(adir: AttemptDir) -> int:
    """When the job's shim started (it writes the pid file first; root's, the job cannot
    touch it); 0 — scan everything — when there is none (the shim never ran, or it is gone)."""
    try:
        return os.stat(adir.pid_file).st_mtime_ns
    except OSError:
        return 0


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def chown_tree(top: Path, user: JobUser) -> None:
    if not top.exists():
        return
    os.chown(top, user.uid, user.gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.chown(os.path.join(folder, name), user.uid, user.gid, follow_symlinks=False)


def drop_links(top: Path) -> None:
    for path in _links(top):
        path.unlink(missing_ok=True)


def _links(top: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            path = Path(folder, name)
            if path.is_symlink():
                yield path


def mount_tmpfs(folder: Path, size: str, owner: JobUser) -> None:
    options = f"size={size},mode=0700,uid={owner.uid},gid={owner.gid},nosuid,nodev"
    _run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
         f"cannot mount a tmpfs on {folder}")


def unmount(folder: Path) -> None:
    if os.path.ismount(folder):
        with contextlib.suppress(StartError):
            _run(["umount", str(folder)], f"cannot unmount {folder}")
        if os.path.ismount(folder):  # still busy: detach it, the kernel frees it when unused
            with contextlib.suppress(StartError):
                _run(["umount", "--lazy", str(folder)], f"cannot unmount {folder}")


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise StartError(f"{what}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        raise StartError(f"{what}: {done.stderr.strip() or f'exit {done.returncode}'}")


def for_agent(mode: str, tmpfs: str | None, work_dir: Path,
              euid: int | None = None) -> Isolation:
    """The agent's isolation (``euid``: the agent's, unless a test pretends otherwise); says
    once what it does not guarantee."""
    euid = os.geteuid() if euid is None else euid
    check_tmpfs(tmpfs, euid)
    decision = decide(mode, euid, unreachable(work_dir) if euid == 0 else None)
    if decision.job_users:
        log.info("jobs run as their own users (%s); work dir %s", decision.reason, work_dir)
        return Isolation(UidPool(), tmpfs)
    log.warning("jobs run as the agent's user (%s); not guaranteed: %s", decision.reason,
                "; ".join(decision.gaps))
    return Isolation(None, tmpfs, decision.gaps)
