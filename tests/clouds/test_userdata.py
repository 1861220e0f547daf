"""The user data of a launched instance: its checks, its size, and the script itself run with
stand-ins for Python, pip and the agent (what it installs, writes and starts, and that the
token never reaches a command line). tests/clouds/test_boot.py boots a real agent with it."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bourse.clouds.userdata import MAX_BYTES, user_data
from bourse.core.errors import InvalidInput

TOKEN = "e-Zm9vYmFyLXNlY3JldC10b2tlbi0xMjM0NTY3ODkw"
LAUNCH: dict[str, Any] = dict(
    server_url="https://bourse.example.com:8470", enrol_token=TOKEN, node_name="aws-i-0abc",
    version="0.1.0", provider="aws", region="us-east-1", zone="use1-az1",
    instance_type="p5.48xlarge", spot=True, spot_price=31.5, price=31.5)
# logs its arguments, one per line, then a blank line; `-c` (the version check) fails, so the
# script installs; `-m venv DIR` makes DIR a virtualenv of stand-ins
FAKE_PYTHON = """#!/bin/sh
for a in "$@"; do printf '%s\\n' "$a"; done >> "$CALLS"; echo >> "$CALLS"
if [ -n "${PIDS:-}" ]; then echo "$$" >> "$PIDS"; fi
if [ "$1" = -c ]; then exit "${INSTALLED:-1}"; fi
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && cp "$0" "$3/bin/bourse"
fi
"""


def script(**changes: Any) -> str:
    return user_data(**{**LAUNCH, **changes})


def test_it_is_sh_far_under_ec2s_limit() -> None:
    text = script(metadata_url="http://169.254.169.254", gpus="h100-80gb:8")
    assert text.startswith("#!/bin/sh\n")
    assert len(text.encode()) < MAX_BYTES // 2
    subprocess.run(["sh", "-n"], input=text, text=True, check=True)  # parses
    with pytest.raises(InvalidInput, match="over EC2's 16384") as refused:
        script(server_url="https://" + "a" * 17000 + ".example.com")
    assert refused.value.field == "server_url"


@pytest.mark.parametrize(("changes", "field"), [
    ({"server_url": "bourse.example.com"}, "server_url"),
    ({"server_url": "https://h/\nreboot"}, "server_url"),
    ({"enrol_token": "two words"}, "enrol_token"),
    ({"enrol_token": "e-x\nBOURSE_TOKEN\nreboot"}, "enrol_token"),
    ({"enrol_token": ""}, "enrol_token"),
    ({"node_name": "a node"}, "node_name"),
    ({"version": "latest"}, "version"),
    ({"version": "0.1.0\nreboot"}, "version"),
    ({"region": "us-east-1; reboot"}, "region"),
    ({"zone": "use1-az1\nreboot"}, "zone"),
    ({"instance_type": "p5.48xlarge$(reboot)"}, "instance_type"),
    ({"spot_price": -1.0}, "spot_price"),
    ({"price": float("nan")}, "price"),
    ({"python": "python3 -c reboot"}, "python"),
    ({"metadata_url": "http://169.254.169.254/latest"}, "metadata_url"),
    ({"gpus": "h100 x8"}, "gpus"),
    ({"network": "aws:use1-az1; reboot"}, "network"),
    ({"declared_sla": 0.0}, "declared_sla"),
    ({"declared_sla": 1.5}, "declared_sla"),
    ({"declared_sla": float("inf")}, "declared_sla"),
])
def test_bad_values_are_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        script(**changes)
    assert refused.value.field == field


def run(text: str, root: Path, **env: str) -> Path:
    """Run the script under ``root`` with the stand-ins; returns the calls' log."""
    fakes = root / "fakes"
    fakes.mkdir(parents=True)
    python = fakes / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    calls = root / "calls"
    subprocess.run(["/bin/sh", "-c", text], check=True, timeout=30, env={
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CALLS": str(calls),
        "BOURSE_BOOT_ROOT": str(root), "BOURSE_BOOT_USER": "root", **env})
    return calls


def calls_of(calls: Path) -> list[list[str]]:
    """The stand-ins' calls, each its arguments."""
    text = calls.read_text() if calls.exists() else ""
    return [call.split("\n") for call in text.split("\n\n") if call]


def agent_argv(calls: Path, timeout: float = 10.0) -> list[str]:
    """The arguments the (stand-in) agent was started with (in the background)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = [call for call in calls_of(calls) if call[0] == "agent"]
        if started:
            return started[0]
        time.sleep(0.02)
    raise AssertionError(f"the agent was not started: {calls_of(calls)}")


def test_it_installs_the_coordinators_version_and_starts_the_agent(tmp_path: Path) -> None:
    python = str(tmp_path / "fakes" / "python3")
    calls = run(script(python=python, metadata_url="http://127.0.0.1:8111",
                       gpus="h100-80gb:8"), tmp_path)
    argv = agent_argv(calls)
    venv = tmp_path / "opt" / "bourse" / "venv"
    make_venv, install, started = calls_of(calls)  # no venv at all: nothing to ask
    assert make_venv == ["-m", "venv", str(venv)]
    assert install == ["-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                       "bourse[agent]==0.1.0"]
    assert started == argv
    token_file = tmp_path / "etc" / "bourse" / "enrol-token"
    assert argv == [
        "agent", "--token-file", str(token_file),
        "--work-dir", str(tmp_path / "var" / "lib" / "bourse" / "agent"),
        "--server", "https://bourse.example.com:8470", "--name", "aws-i-0abc",
        "--provider", "aws", "--region", "us-east-1", "--declare-gpus", "h100-80gb:8",
        "--interruptible", "--spot-notice", "imds", "--spot-price", "31.5",
        "--metadata-url", "http://127.0.0.1:8111"]
    assert token_file.read_text() == TOKEN + "\n"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert TOKEN not in calls.read_text()  # in no command line
    assert (tmp_path / "var" / "log" / "bourse" / "agent.log").exists()


def test_a_machine_image_with_the_version_installed_skips_the_install(tmp_path: Path) -> None:
    venv = tmp_path / "image-venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "bourse"):
        (venv / "bin" / name).write_text(FAKE_PYTHON)
        (venv / "bin" / name).chmod(0o755)
    calls = run(script(), tmp_path, BOURSE_BOOT_VENV=str(venv), INSTALLED="0")
    agent_argv(calls)
    check, started = calls_of(calls)  # the version check said yes: no venv, no pip
    assert check[0] == "-c" and check[-1] == "0.1.0" and started[0] == "agent"
    assert started[1:3] == ["--token-file", str(tmp_path / "etc" / "bourse" / "enrol-token")]


def test_in_a_container_the_agent_is_the_main_process(tmp_path: Path) -> None:
    """A pod lives as long as its main process: with BOURSE_BOOT_FOREGROUND=1 the script
    becomes the agent (exec), logging to its output, instead of starting it in the
    background and exiting."""
    venv = tmp_path / "image-venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "bourse"):
        (venv / "bin" / name).write_text(FAKE_PYTHON)
        (venv / "bin" / name).chmod(0o755)
    pids, calls = tmp_path / "pids", tmp_path / "calls"
    proc = subprocess.run(["/bin/sh", "-c", f"echo $$ > {pids}; exec /bin/sh -c "
                           f"{shlex.quote(script(price=0.0))}"],
                          capture_output=True, text=True, timeout=30, check=False, env={
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CALLS": str(calls), "PIDS": str(pids),
        "BOURSE_BOOT_ROOT": str(tmp_path), "BOURSE_BOOT_USER": "root", "INSTALLED": "0",
        "BOURSE_BOOT_VENV": str(venv), "BOURSE_BOOT_FOREGROUND": "1"})
    assert proc.returncode == 0, proc.stderr
    shell, _version_check, agent = pids.read_text().split()
    assert agent == shell  # the same process: the script became the agent
    assert calls_of(calls)[-1][0] == "agent"
    assert "in the foreground" in proc.stderr
    assert not (tmp_path / "var" / "lib" / "bourse" / "agent.pid").exists()  # no nohup


def test_an_on_demand_node_is_not_sold_as_spot(tmp_path: Path) -> None:
    text = script(spot=False, spot_price=None, price=32.77)
    assert "--interruptible" not in text and "--spot-notice" not in text
    assert "on demand at $32.77/h" in text


def test_values_are_quoted_for_the_shell() -> None:
    text = script(server_url="https://h.example.com/bourse?x=1&y=$HOME")
    assert shlex.quote("https://h.example.com/bourse?x=1&y=$HOME") in text


def test_it_refuses_paths_with_quotes(tmp_path: Path) -> None:
    root = tmp_path / "it's"
    done = subprocess.run(["/bin/sh", "-c", script()], check=False, capture_output=True,
                          text=True,
                          env={"PATH": os.environ["PATH"], "BOURSE_BOOT_ROOT": str(root)})
    assert done.returncode == 2 and "no quotes in paths" in done.stderr
    assert not root.exists()


def test_a_gang_member_declares_its_network_and_leaves_its_address_to_the_agent(
        tmp_path: Path) -> None:
    calls = run(script(spot=False, spot_price=None, network="aws:use1-az1",
                       python=str(tmp_path / "fakes" / "python3")), tmp_path)
    argv = agent_argv(calls)
    assert argv[argv.index("--network") + 1] == "aws:use1-az1"
    assert "--address" not in argv  # the agent's default: where it reaches the coordinator from
    assert "--network" not in script()


def test_a_clouds_declared_sla_is_what_its_agent_declares(tmp_path: Path) -> None:
    calls = run(script(spot=False, spot_price=None, declared_sla=0.995,
                       python=str(tmp_path / "fakes" / "python3")), tmp_path)
    argv = agent_argv(calls)
    assert argv[argv.index("--declare-sla") + 1] == "0.995"
    assert "--declare-sla" not in script()  # none declared: the agent declares none
