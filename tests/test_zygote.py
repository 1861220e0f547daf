"""The suite's fork server (``tests/zygote.py``): a forked `python -m bourse` behaves as a fresh
one — its exit status, its signals, its own environment, directory and log — and the modules it
preloads read nothing of the environment while they are imported, so no start sees the
zygote's own."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from zygote import PRELOAD, Zygote, start_bourse

# any variable a test gives one of its processes (and the worker's zygote does not have)
PER_START = ("BOURSE_", "AWS_", "MLFLOW_", "PYTHONUNBUFFERED")
RECORD = f"""
import json, os, sys
read = []
class Recording(type(os.environ)):
    def __getitem__(self, key):
        read.append(key)
        return super().__getitem__(key)
os.environ.__class__ = Recording
for module in {list(PRELOAD)!r}:
    __import__(module)
print(json.dumps(read))
"""


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    zygote = Zygote()
    yield zygote
    zygote.stop()


def test_the_preloaded_modules_read_no_start_s_variable_when_imported() -> None:
    done = subprocess.run([sys.executable, "-c", RECORD], capture_output=True, text=True,
                          check=True, timeout=120)
    read = json.loads(done.stdout.splitlines()[-1])
    assert [key for key in read if key.startswith(PER_START)] == []


def test_a_forked_command_gets_its_own_environment_directory_and_log(
        forks: Zygote, tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "BOURSE_HOME": str(home)}
    process = forks.spawn(["context", "list", "--json"], env, log)
    assert process.wait(60) == 0, log.read_text()
    assert json.loads(log.read_text()) == []  # the new BOURSE_HOME's: no context yet
    assert process.pid != forks.popen.pid


def test_the_exit_status_is_the_command_s(forks: Zygote, tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    process = forks.spawn(["no-such-command"], {"PATH": "/usr/bin:/bin"}, log)
    assert process.wait(60) == 2  # click's usage error
    assert "no command 'no-such-command'" in log.read_text()


def test_a_killed_coordinator_reports_the_signal_and_frees_its_port(
        forks: Zygote, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    process = start_bourse(["server", "--data-dir", str(tmp_path / "data"), "--no-store",
                            "--host", "127.0.0.1", "--port", str(port), "--credentials",
                            str(tmp_path / "admin.json")], {"PATH": "/usr/bin:/bin"}, log)
    deadline = time.monotonic() + 60
    while not healthy(port):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    assert process.wait(30) == -signal.SIGKILL
    assert not healthy(port)


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
