"""The I/O of ``bourse fleets``: the system's ``ssh`` and ``scp`` run against one host, with a
time limit; their output comes back, never to the terminal (a script's standard input carries
the enrolment token, and nothing echoes it)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bourse.clouds.ssh_hosts import SshHost, SshOptions, explain, scp_argv, ssh_argv
from bourse.core.errors import InvalidInput

SCRIPT_TIMEOUT_S = 900.0  # a pip install of bourse[agent] from a slow index
SSH_FAILED = 255  # OpenSSH's own exit status: it could not connect or authenticate


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str

    @property
    def unreachable(self) -> bool:
        return self.returncode == SSH_FAILED

    def why(self) -> tuple[str, str]:
        """(reason, hint) of an ssh that could not get through."""
        return explain(self.stderr)


def require_client() -> None:
    missing = [tool for tool in ("ssh", "scp") if shutil.which(tool) is None]
    if missing:
        raise InvalidInput(f"{' and '.join(missing)} not found on this machine's PATH",
                           field="--ssh", hint="install OpenSSH's client (openssh-client)")


def run(host: SshHost, options: SshOptions, command: str, *, stdin: str = "",
        timeout: float = 60.0) -> Ran:
    """Run ``command`` on ``host``; ``stdin``: what it reads (a script for ``sh -s``)."""
    return _run(ssh_argv(host, options, command), stdin, timeout)


def run_script(host: SshHost, options: SshOptions, script: str,
               timeout: float = SCRIPT_TIMEOUT_S) -> Ran:
    return run(host, options, "sh -s", stdin=script, timeout=timeout)


def copy(host: SshHost, options: SshOptions, source: Path, target: str,
         timeout: float = 300.0) -> Ran:
    return _run(scp_argv(host, options, source, target), "", timeout)


def _run(argv: list[str], stdin: str, timeout: float) -> Ran:
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (
            exc.stdout or "")
        return Ran(124, out, f"timed out after {timeout:g} s")
    return Ran(done.returncode, done.stdout, done.stderr)
