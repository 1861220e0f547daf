"""The process boundary: an attempt's directory, the ``/bin/sh`` shim that runs a job, and the
few calls that look at or signal its process.

Layout of an attempt, ``<work_dir>/jobs/<job_id>/<attempt>/``: ``work/`` (the job's files and
cwd), ``logs/stdout``, ``logs/stderr``, ``tmp/`` (its TMPDIR), ``pid`` (written by the shim) and
``exit`` (the job's exit status, written by the shim when the job ends).

The shim is a few lines of sh, not Python, because starting Python costs tens of milliseconds
per job. It runs in a new session (so its pid is the job's process group), so the job survives
the agent being killed, and it outlives the job to record its exit status where a restarted
agent finds it. It *catches* TERM/INT/HUP with a no-op trap: caught signals are reset to their
default in children (ignored ones would be inherited), so a signal to the group stops the job
while the shim lives on to write ``exit``. The command runs in a subshell so that even a shell
builtin (``exit``, ``exec``) cannot end the shim early; dash execs its last command there
without another fork. ``exit`` is written in place, with a builtin (no temporary file renamed
by ``mv``: starting ``mv`` doubled the shim's cost per job): it is read only once the shim has
ended, so no reader sees it half-written, and a shim killed while writing it leaves an exit
status as unknown as it would leave none. Under a root agent the shim stays root and the
command it runs drops to the attempt's own user (`bourse.agent.users.JobUser.wrap`), so the
job can neither stop the shim nor forge its files.

Given the node's lease (``agent.fence``), the shim also starts a watchdog beside the job: a
subshell in the job's process group that, every few seconds, writes a file of its own and
compares its time with the lease's (``[ now -nt lease ]``, builtins only) and, once the lease
has run out, writes ``fenced``, SIGTERMs the group and SIGKILLs it after a grace. The job stays
the shim's foreground command (a background one would start with SIGINT ignored); the shim
kills the watchdog when the job ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

SHIM = """\
d=$1; cd "$2" || exit 126; unset OLDPWD; l=$3; p=$4; g=$5; shift 5
trap : TERM INT HUP
echo $$ >"$d/pid"
w=
if [ -n "$l" ]; then
 (trap : TERM HUP; while sleep "$p"; do echo >"$d/now"; if [ "$d/now" -nt "$l" ]; then
  echo "$l" >"$d/fenced"; kill -TERM 0; sleep "$g"; kill -KILL 0; fi; done
 ) </dev/null >/dev/null 2>&1 &
 w=$!
fi
("$@") </dev/null
s=$?
[ -z "$w" ] || kill -KILL $w 2>/dev/null
echo $s >"$d/exit"
exit $s
"""
NO_FENCE = ("", "", "")

_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND


@dataclass(frozen=True)
class AttemptDir:
    root: Path

    @classmethod
    def of(cls, work_dir: Path, job_id: str, attempt: int) -> AttemptDir:
        # A JobId may be "." or ".."; '%' cannot occur in one, so the escaped name is unique.
        name = job_id.replace(".", "%2E") if set(job_id) == {"."} else job_id
        return cls(work_dir / "jobs" / name / str(attempt))

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def stdout(self) -> Path:
        return self.root / "logs" / "stdout"

    @property
    def stderr(self) -> Path:
        return self.root / "logs" / "stderr"

    @property
    def exit_file(self) -> Path:
        return self.root / "exit"

    @property
    def pid_file(self) -> Path:
        return self.root / "pid"

    @property
    def fenced_file(self) -> Path:
        """Written by the shim when the attempt fenced itself (``agent.fence``)."""
        return self.root / "fenced"

    def create(self) -> None:
        """The directory and its empty parts. The log files are made by ``spawn`` (before
        the shim runs, so before anything reads them): on a busy disk each file or directory
        made costs the agent's loop as much as the rest of a start."""
        self.root.mkdir(parents=True, exist_ok=True)
        for d in (self.work, self.tmp, self.stdout.parent):
            d.mkdir(exist_ok=True)


def spawn(adir: AttemptDir, cwd: Path, command: list[str], env: dict[str, str],
          fence: tuple[str, str, str] = NO_FENCE) -> int:
    """Start ``command`` under the shim in its own session; returns the shim's pid.
    ``fence``: the node's lease file, how often to check it and the grace between SIGTERM
    and SIGKILL once it has run out (``agent.fence``); empty strings: no fencing.

    Raises OSError (or ValueError for a NUL in an argument) when the shim cannot start."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(adir.stdout), _LOG_FLAGS, 0o644),
        (os.POSIX_SPAWN_OPEN, 2, str(adir.stderr), _LOG_FLAGS, 0o644),
    ]
    argv = ["sh", "-c", SHIM, "sh", str(adir.root), str(cwd), *fence, *command]
    return os.posix_spawn("/bin/sh", argv, env, file_actions=actions, setsid=True)


def read_int(path: Path) -> int | None:
    """The integer in a small file the shim wrote, or None when absent or unreadable."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def start_time(pid: int, since: float | None = None) -> int | None:
    """The start time (clock ticks since boot) of process ``pid``, zombie or not; None if gone,
    or if it started before the wall time ``since`` (then it is not the process we look for).

    Recorded at spawn and compared later, it tells our process from a later one reusing the
    pid."""
    stat = _stat(pid)
    if stat is None:
        return None
    if since is not None and _boot_time() + stat[1] / os.sysconf("SC_CLK_TCK") < since - 1.0:
        return None
    return stat[1]


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def is_alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` is still the process that started at ``started`` and has not ended."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[1] == started


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parentheses; the fields after it do not.
    rest = raw[raw.rindex(b")") + 2:].split()
    return rest[0].decode(), int(rest[19])


def reap(pid: int) -> tuple[bool, int | None]:
    """Collect our child ``pid`` if it ended: (ended, wait status).

    Raises ChildProcessError when ``pid`` is not our child (an adopted job): liveness then comes
    from :func:`is_alive`."""
    done, status = os.waitpid(pid, os.WNOHANG)
    return (done != 0, status if done else None)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
