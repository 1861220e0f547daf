"""A launched instance's first boot, on this machine: a boot harness for the user data.

:func:`boot` runs a user-data script (``bourse.clouds.userdata``) as cloud-init would — once,
with ``/bin/sh``, in a clean environment — on a stand-in machine: a temporary root directory
(``BOURSE_BOOT_ROOT``: its ``/etc``, ``/var/lib``, ``/var/log`` and HOME), a PATH whose
``nvidia-smi`` replays a real capture from tests/fixtures/nvidia-smi (the GPUs the offer
claims; NVML is absent here, so the probe reads that), the test's virtualenv as the machine
image's bourse (so the script's install step is skipped: nothing here reaches PyPI), and a
process group of its own — in a network namespace of its own when given one (tests/e2e's
``Netns``). systemd is absent under that root, so the agent starts with nohup. The script runs
as this user (root here): creating a system user on a shared machine is not done.

The :class:`Machine` it returns reads the agent's log and is stopped by killing its process
group (the agent) and its jobs (which live in sessions of their own, by design).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

from harness import kill_jobs, tail

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = TESTS / "fixtures" / "nvidia-smi"
FAKE_SMI = TESTS / "probe" / "fake_nvidia_smi.py"
KINDS = {"xml": "xml", "txt": "text", "csv": "csv", "table": "table"}  # capture prefix -> form
BOOT_TIMEOUT_S = 60.0


class Machine:
    def __init__(self, root: Path, pgid: int, boot_log: Path) -> None:
        self.root, self.pgid, self.boot_log = root, pgid, boot_log

    @property
    def log(self) -> Path:
        """The agent's log (as /var/log/bourse/agent.log)."""
        return self.root / "var" / "log" / "bourse" / "agent.log"

    @property
    def work_dir(self) -> Path:
        return self.root / "var" / "lib" / "bourse" / "agent"

    @property
    def agent_pid(self) -> int:
        return int((self.root / "var" / "lib" / "bourse" / "agent.pid").read_text())

    @property
    def node_id(self) -> str | None:
        try:
            return str(json.loads((self.work_dir / "node.json").read_text())["node_id"])
        except (OSError, ValueError, KeyError):
            return None

    def agent_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self) -> str:
        return (f"----- boot ({self.boot_log}) -----\n{tail(self.boot_log)}\n"
                f"----- agent ({self.log}) -----\n{tail(self.log)}")

    def stop(self) -> None:
        """The machine goes: its agent (the process group) and its jobs are killed."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)
        kill_jobs(self.work_dir)


def fake_gpus(bin_dir: Path, capture: str) -> None:
    """An ``nvidia-smi`` in ``bin_dir`` that replays ``capture`` (a file of FIXTURES)."""
    kind = KINDS[capture.split("-", 1)[0]]
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\n{FAKE_SMI.read_text()}")
    script.chmod(0o755)
    (bin_dir / "capture.json").write_text(json.dumps({kind: str(FIXTURES / capture)}))


def boot(script: str, capture: str, root: Path, *, prefix: Sequence[str] = (),
         timeout: float = BOOT_TIMEOUT_S, env: Mapping[str, str] | None = None) -> Machine:
    """Run ``script`` as the first boot of a machine rooted at ``root`` whose GPUs are
    ``capture``; ``prefix`` runs it elsewhere (``Netns.prefix``); ``env``: more of the
    machine's environment (its metadata service's URL, say). Returns once the script
    has finished (the agent then runs on); AssertionError with its output if it failed."""
    bin_dir = root / "usr" / "local" / "bin"
    fake_gpus(bin_dir, capture)
    (root / "root").mkdir(parents=True, exist_ok=True)
    user_data = root / "var" / "lib" / "cloud" / "instance" / "user-data.txt"
    user_data.parent.mkdir(parents=True, exist_ok=True)
    user_data.write_text(script)
    user_data.chmod(0o600)  # as cloud-init keeps it: the token is in there
    boot_log = root / "var" / "log" / "cloud-init-output.log"
    boot_log.parent.mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{bin_dir}:{Path(sys.prefix) / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": str(root / "root"), "LANG": "C.UTF-8", "BOURSE_BOOT_ROOT": str(root),
           "BOURSE_BOOT_USER": getpass.getuser(), "BOURSE_BOOT_VENV": sys.prefix,
           **(env or {})}
    with boot_log.open("ab") as out:
        proc = subprocess.Popen([*prefix, "/bin/sh", str(user_data)], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    machine = Machine(root, proc.pid, boot_log)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        machine.stop()
        raise AssertionError(f"the user data ran past {timeout} s\n{machine.tail()}") from None
    if code != 0:
        machine.stop()
        raise AssertionError(f"the user data failed ({code})\n{machine.tail()}")
    return machine
