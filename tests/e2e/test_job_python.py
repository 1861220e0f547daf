"""Which Python a real agent's jobs run with: by default the agent's own (its virtualenv), not
whatever ``python`` comes first on the PATH it was started with — a hand-started agent
without its virtualenv on PATH ran jobs with the system's and they failed with
``ModuleNotFoundError: torch`` —, or the one ``--python`` names; ``bourse nodes show`` says
which."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import Exchange

from bourse.cli.nodes import describe_node
from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.slow
WHERE = "import sys; print(sys.executable); print(sys.prefix)"
BARE_PATH = {"PATH": "/usr/bin:/bin"}  # no virtualenv on it


def ran_with(exchange: Exchange, command: list[str]) -> list[str]:
    job = exchange.client.submit(JobSpec(command=command))
    final = exchange.wait_ended(job.id, 60)
    out = b"".join(base64.b64decode(c.data) for c in exchange.client.iter_logs(job.id))
    assert final.state == "SUCCEEDED", (final, out)
    return out.decode().splitlines()


def shown(exchange: Exchange, node_id: str | None) -> str:
    assert node_id is not None
    return "\n".join(describe_node(exchange.client.node(node_id), time.time()))


def test_jobs_run_with_the_agent_s_own_python_whatever_its_path(exchange: Exchange) -> None:
    agent = exchange.agent("n1", env=BARE_PATH)
    assert ran_with(exchange, ["python", "-c", WHERE]) == [os.path.abspath(sys.executable),
                                                            sys.prefix]
    assert ran_with(exchange, ["pip", "--version"])[0].endswith(
        f"(python {sys.version_info.major}.{sys.version_info.minor})")
    assert f"job python   {os.path.abspath(sys.executable)} (" in shown(exchange, agent.node_id)


def test_jobs_run_with_the_python_the_agent_is_given(exchange: Exchange,
                                                     tmp_path: Path) -> None:
    venv = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    agent = exchange.agent("n1", env=BARE_PATH, args=["--python", python])
    assert ran_with(exchange, ["python", "-c", WHERE]) == [python, str(venv)]
    assert f"job python   {python} (" in shown(exchange, agent.node_id)
