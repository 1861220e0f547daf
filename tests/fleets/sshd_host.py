"""A host of an SSH fleet on this machine: a real OpenSSH server (``sshd -D``, Debian's
openssh-server) in a network namespace, key authentication only, with its own host key,
``authorized_keys`` and HOME in a temporary directory.

The namespaces are the gang tests' LAN (tests/gang/bridge.py): one bridge joins the hosts to
each other and to this machine, where the coordinator listens on the bridge's host address,
so a fleet that says its hosts reach each other really does. The sshd's ``SetEnv`` gives each
session the host's HOME (so two hosts on one machine keep apart what the install script
writes in ``~/.bourse``), the agent's work dir and virtualenv (root's would be in
/var/lib/bourse and /opt/bourse), and the PYTHONPATH of the code under test. Root logs in
(the tests run as root); systemd does not run here, so the agent starts detached.
:meth:`Host.stop` kills the sshd by its pid, the agent by the pid file the script wrote, and
the agent's jobs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gang"))

from bridge import Bridge
from harness import kill_jobs
from netns import run, unavailable

CONFIG = """\
Port {port}
ListenAddress {address}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
SetEnv {env}
"""


def keygen(path: Path) -> Path:
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)])
    return path


def require_sshd() -> str:
    sshd = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists()
                                    else None)
    if sshd is None or shutil.which("ssh") is None:
        unavailable("openssh-server and openssh-client are not installed")
    if os.geteuid() != 0:
        unavailable("network namespaces need root")
    return sshd


class Host:
    def __init__(self, root: Path, bridge: Bridge, index: int) -> None:
        self.prefix, self.ns_ip = bridge.prefix(index), bridge.address(index)
        self.name = bridge.name(index)
        self.dir = root / f"host{index}"
        self.home = self.dir / "home"
        self.work = self.dir / "work"
        for d in (self.home, self.work):
            d.mkdir(parents=True, exist_ok=True)
        self.sshds: list[subprocess.Popen[bytes]] = []

    def sshd(self, port: int, authorized: list[Path], pythonpath: str,
             env: dict[str, str] | None = None) -> None:
        """An sshd on ``ns_ip:port`` that lets in the holders of ``authorized`` (public keys);
        returns once it listens. ``env``: more of its sessions' environment."""
        tag = f"sshd-{port}"
        host_key = self.dir / f"{tag}-host-key"
        if not host_key.exists():
            keygen(host_key)
        keys = self.dir / f"{tag}-authorized_keys"
        keys.write_text("".join(k.read_text() for k in authorized))
        config = self.dir / f"{tag}.conf"
        config.write_text(CONFIG.format(
            port=port, address=self.ns_ip, host_key=host_key, pid_file=self.dir / f"{tag}.pid",
            authorized=keys, env=" ".join(f"{k}={v}" for k, v in {
                "HOME": self.home, "BOURSE_AGENT_WORK_DIR": self.work,
                "BOURSE_AGENT_VENV": self.dir / "agent-venv", "PYTHONPATH": pythonpath,
                **(env or {})}.items())))
        log = self.dir / f"{tag}.log"
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # its privilege separation dir,
        # which Debian's service makes at boot (empty, owned by root)
        with log.open("ab") as err:
            proc = subprocess.Popen([*self.prefix, require_sshd(), "-D", "-e", "-f",
                                     str(config)], stdout=subprocess.DEVNULL, stderr=err,
                                    start_new_session=True)
        self.sshds.append(proc)
        deadline = time.monotonic() + 10
        while "Server listening" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"sshd on {self.ns_ip}:{port} did not start:\n{log.read_text()}")
            time.sleep(0.05)

    def host_key_line(self, port: int) -> str:
        """A known_hosts line for the sshd on ``port``."""
        key = (self.dir / f"sshd-{port}-host-key.pub").read_text().split()
        return f"[{self.ns_ip}]:{port} {key[0]} {key[1]}\n"

    @property
    def agent_pid(self) -> int | None:
        try:
            return int((self.home / ".bourse" / "agent.pid").read_text())
        except (OSError, ValueError):
            return None

    def agent_log(self) -> str:
        path = self.home / ".bourse" / "agent.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        pid = self.agent_pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        kill_jobs(self.work)
        for proc in self.sshds:
            proc.kill()
            proc.wait()
        self.sshds.clear()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie (its parent is gone or not reaping) is gone
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True
