"""The Python jobs run with: ``bourse agent --python PATH`` (or ``BOURSE_AGENT_PYTHON``), by
default the one the agent itself runs on (``sys.executable``: its virtualenv, with bourse,
and torch where it was installed).

It is checked once, at start: it must exist, be executable and be a Python — it is run once
with ``-c``, which also says its version, prefix and site-packages. Its ``bin`` directory goes
first on every job's ``PATH``, so ``python``, ``pip`` and the console scripts installed beside
it resolve there whatever the agent's own ``PATH`` holds; a job with an environment of its
own (``packages``/``torch``: a virtualenv built on this Python; an ``image``) has that first
instead. The hello reports it (``Capabilities.job_python``), and ``bourse nodes show`` shows
it.

Under a root agent whose jobs run as their own users, those users must be able to reach and
run it: a Python under ``/root`` (pyenv's default for root) is one they cannot, and every
``python`` a job runs would fail with "Permission denied" (`python_unreachable`).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bourse.agent.attempt import DEFAULT_PATH
from bourse.agent.isolation import Isolation, unreachable
from bourse.core.errors import InvalidInput
from bourse.protocol.common import Tool

log = logging.getLogger(__name__)

FLAG = "--python"
PROBE_TIMEOUT_S = 30.0
# -I: the agent's PYTHON* variables and user site do not change the answer
_PROBE = ("import sys, sysconfig; print(sys.version.split()[0]); print(sys.prefix); "
          "print(sysconfig.get_paths()['purelib'])")


@dataclass(frozen=True)
class JobPython:
    path: str  # absolute, its links kept: a virtualenv's bin/python is a link out of it
    version: str
    prefix: str  # sys.prefix: the virtualenv, or the installation
    purelib: str  # its site-packages, which job environments see behind their own

    @property
    def bin(self) -> str:
        return os.path.dirname(self.path)

    def first_on(self, path: str) -> str:
        """``path`` with this Python's ``bin`` first (and nowhere else)."""
        rest = [p for p in path.split(os.pathsep) if p and p != self.bin]
        return os.pathsep.join([self.bin, *rest])

    def tool(self) -> Tool:
        return Tool(name="python", version=self.version, path=self.path)


def job_environ(environ: Mapping[str, str], python: JobPython) -> dict[str, str]:
    """``environ`` with ``python``'s ``bin`` first on its PATH: what jobs' PATH is made of."""
    return {**environ, "PATH": python.first_on(environ.get("PATH", DEFAULT_PATH))}


def find(python: str | None = None) -> JobPython:
    """The Python at ``python`` (a path, or a name looked up on PATH; default: the agent's
    own), checked by running it once; `InvalidInput` naming ``--python`` when it is not
    one."""
    path = _locate(python or sys.executable)
    try:
        done = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InvalidInput(f"{path} could not be run: {exc}", field=FLAG,
                           hint="name a Python interpreter, e.g. /opt/venv/bin/python") from None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 3:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise InvalidInput(f"{path} is not a Python interpreter ({said})", field=FLAG,
                           hint="name a Python interpreter, e.g. /opt/venv/bin/python")
    return JobPython(path, *lines)


def _locate(python: str) -> str:
    found = python if os.sep in python else shutil.which(python)
    if found is None or not os.path.isfile(found):
        raise InvalidInput(f"{python}: no such file", field=FLAG,
                           hint="give the path of a Python interpreter, e.g. "
                                "/opt/venv/bin/python")
    if not os.access(found, os.X_OK):
        raise InvalidInput(f"{found} is not executable", field=FLAG,
                           hint=f"chmod +x {found}, or name another Python")
    return os.path.abspath(found)


def python_unreachable(python: Path, prefix: Path) -> str | None:
    """Why job users (``--job-users``) could not run this python, or None. A python under a
    private home (pyenv's default for root: /root is 0700) is one they cannot: every job of
    theirs would fail with "python: Permission denied"."""
    why = unreachable(python, "the python") or unreachable(prefix / "bin", "the python's env")
    if why is None and not os.stat(python.resolve()).st_mode & stat.S_IXOTH:
        why = f"job users may not execute {python.resolve()}"
    return why


def check_job_users(python: JobPython, isolation: Isolation) -> str | None:
    """Says at start, loudly, when the node's jobs run as users who cannot run ``python``;
    returns why (None when they can, or jobs run as the agent's user)."""
    if isolation.pool is None:
        return None
    why = python_unreachable(Path(python.path), Path(python.prefix))
    if why is not None:
        log.warning("jobs run as their own users, who cannot run the Python put first on "
                    "their PATH, %s (%s): every job that runs `python` will fail with "
                    "'Permission denied'. Install a Python every user can reach (e.g. under "
                    "/opt or /usr/local) and pass it with --python, or run the agent with "
                    "--job-users off", python.path, why)
    return why
