"""The I/O of ``bourse fleets``: the system's ``ssh`` run against one host, with a time limit;
its output comes back, never to the terminal (a script's standard input carries the enrolment
token, and nothing echoes it). A file is copied through ssh's standard input too (``cat`` on
the host), so a host needs no SFTP subsystem (which OpenSSH 9's ``scp`` uses) and no ``scp``."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bourse.core.errors import InvalidInput
from bourse.fleets.hosts import SshHost, SshOptions, explain, ssh_argv

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
    if shutil.which("ssh") is None:
        raise InvalidInput("ssh not found on this machine's PATH", field="--ssh",
                           hint="install OpenSSH's client (openssh-client)")


def run(host: SshHost, options: SshOptions, command: str, *, stdin: str = "",
        timeout: float = 60.0) -> Ran:
    """Run ``command`` on ``host``; ``stdin``: what it reads (a script for ``sh -s``)."""
    return _run(ssh_argv(host, options, command), stdin, timeout)


def run_script(host: SshHost, options: SshOptions, script: str,
               timeout: float = SCRIPT_TIMEOUT_S) -> Ran:
    return run(host, options, "sh -s", stdin=script, timeout=timeout)


def copy(host: SshHost, options: SshOptions, source: Path, directory: str,
         timeout: float = 300.0) -> Ran:
    """Copy ``source`` into ``directory`` on the host (relative to its ``$HOME``; made 0700
    if missing), whole or not at all (written aside, then renamed)."""
    name = shlex.quote(source.name)
    where = '"$HOME"/' + shlex.quote(directory)
    command = (f"umask 077 && mkdir -p {where} && cat > {where}/.{name}.part && "
               f"mv {where}/.{name}.part {where}/{name}")
    return _run(ssh_argv(host, options, command), source.read_bytes(), timeout)


def _run(argv: list[str], stdin: str | bytes, timeout: float) -> Ran:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    try:
        done = subprocess.run(argv, input=data, capture_output=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        return Ran(124, _text(exc.stdout), f"timed out after {timeout:g} s")
    return Ran(done.returncode, _text(done.stdout), _text(done.stderr))


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""
