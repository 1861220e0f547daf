"""The hosts of an SSH fleet: ``user@host[:port]`` parsed and checked, the ``ssh`` command
line that reaches them, and what a failed ``ssh`` said, as a reason and a hint.

Pure: nothing here runs a command. The system's OpenSSH client does the work
(``bourse.fleets.ssh`` runs it); key authentication only — ``BatchMode`` (never a prompt),
password and keyboard-interactive authentication off, and the host key checked as the
user's ``known_hosts`` (or ``--ssh-config``) says; ``accept_new`` trusts a host seen for the
first time (OpenSSH's ``StrictHostKeyChecking=accept-new``), never a changed key.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from bourse.core.errors import InvalidInput

USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$", re.IGNORECASE)  # POSIX portable, no '@'
HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
CONNECT_TIMEOUT_S = 10
# what OpenSSH prints when it fails, first match wins: (pattern, reason, hint)
FAILURES: tuple[tuple[str, str, str], ...] = (
    ("Permission denied", "the host refused the key (Permission denied)",
     "add the public key of --identity to the user's ~/.ssh/authorized_keys on the host"),
    ("Host key verification failed", "the host's key is not in known_hosts, or changed",
     "check its fingerprint and add it (ssh-keyscan, or ssh once by hand); "
     "--accept-new-host-keys trusts a host seen for the first time"),
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "the host's key changed since it was trusted",
     "if the host was reinstalled, remove its old key with ssh-keygen -R HOST"),
    ("Connection refused", "nothing listens for SSH there (connection refused)",
     "check the port, and that sshd runs on the host"),
    ("Connection timed out", "no answer (connection timed out)",
     "check the address and the firewalls on the way"),
    ("No route to host", "no route to the host", "check the address and the network"),
    ("Could not resolve hostname", "the host name does not resolve",
     "check the name, or give its address"),
    ("Network is unreachable", "the network is unreachable", "check the address"),
    ("Connection closed", "the host closed the connection",
     "check sshd's log on the host (MaxStartups, AllowUsers)"),
)


@dataclass(frozen=True)
class SshHost:
    user: str
    host: str
    port: int = 22

    @property
    def label(self) -> str:
        """``user@host:port`` as given back (IPv6 in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}" + ("" if self.port == 22 else f":{self.port}")

    @property
    def node_name(self) -> str:
        """The host's part of its node's name: letters, digits, '.', '-' and '_'."""
        return re.sub(r"[^A-Za-z0-9._-]", "-", self.host).strip("-.") or "host"


def parse_host(text: str) -> SshHost:
    """``user@host``, ``user@host:2222``, ``user@[fe80::1]:22``; InvalidInput says what is
    wrong with it and how to write it."""
    field = "--ssh"
    if "@" not in text:
        raise InvalidInput(f"--ssh {text!r} has no user", field=field,
                           hint="write it user@host[:port], e.g. ubuntu@10.0.0.5:22")
    user, _, rest = text.rpartition("@")
    if not USER.match(user):
        raise InvalidInput(f"--ssh {text!r}: {user!r} is not a user name", field=field,
                           hint="letters, digits, '_', '.', '-', starting with a letter")
    host, port = _split_port(text, rest)
    _check_host(text, host)
    return SshHost(user=user, host=host, port=port)


def _split_port(text: str, rest: str) -> tuple[str, int]:
    if rest.startswith("["):  # [v6]:port
        host, sep, tail = rest[1:].partition("]")
        if not sep or (tail and not tail.startswith(":")):
            raise InvalidInput(f"--ssh {text!r}: an IPv6 address goes in brackets",
                               field="--ssh", hint="e.g. root@[fd00::5]:22")
        return host, _port(text, tail[1:]) if tail else 22
    if rest.count(":") > 1:
        raise InvalidInput(f"--ssh {text!r}: put an IPv6 address in brackets", field="--ssh",
                           hint="e.g. root@[fd00::5]:22")
    host, sep, port = rest.partition(":")
    return host, _port(text, port) if sep else 22


def _port(text: str, port: str) -> int:
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InvalidInput(f"--ssh {text!r}: {port!r} is not a port (1-65535)",
                           field="--ssh", hint="e.g. user@host:2222, or leave it out for 22")
    return int(port)


def _check_host(text: str, host: str) -> None:
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    if not HOSTNAME.match(host):
        raise InvalidInput(f"--ssh {text!r}: {host!r} is not a host name or an address",
                           field="--ssh", hint="e.g. gpu-01.example.com or 10.0.0.5")


@dataclass(frozen=True)
class SshOptions:
    """How every host of one command is reached."""

    identity: Path | None = None  # the private key; None: ssh's own (agent, ~/.ssh/id_*)
    config: Path | None = None  # an ssh_config file (ProxyJump, known hosts...) for ssh -F
    accept_new: bool = False  # trust a host key seen for the first time

    def check(self) -> None:
        for flag, path in (("--identity", self.identity), ("--ssh-config", self.config)):
            if path is not None and not path.is_file():
                raise InvalidInput(f"{flag} {path}: no such file", field=flag,
                                   hint="give the path of an existing file" + (
                                       ", the private key (not the .pub)"
                                       if flag == "--identity" else ""))


def ssh_argv(host: SshHost, options: SshOptions, command: str) -> list[str]:
    """``ssh`` running ``command`` (one shell line) on ``host``."""
    return ["ssh", *_common(options), "-p", str(host.port), "-l", host.user, "--", host.host,
            command]


def _common(options: SshOptions) -> list[str]:
    argv = [] if options.config is None else ["-F", str(options.config)]
    if options.identity is not None:
        argv += ["-i", str(options.identity), "-o", "IdentitiesOnly=yes"]
    argv += ["-o", "BatchMode=yes", "-o", "PasswordAuthentication=no",
             "-o", "KbdInteractiveAuthentication=no", "-o", "PreferredAuthentications=publickey",
             "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "ServerAliveInterval=15"]
    if options.accept_new:
        argv += ["-o", "StrictHostKeyChecking=accept-new"]
    return argv


def explain(stderr: str) -> tuple[str, str]:
    """(reason, hint) for an ``ssh`` that could not get through (its exit status 255)."""
    for pattern, reason, hint in FAILURES:
        if pattern in stderr:
            return reason, hint
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    return (f"ssh failed: {last.strip()}" if last else "ssh failed",
            "run the same ssh by hand with -v to see why")
