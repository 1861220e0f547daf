"""The Python jobs run with (``bourse agent --python``): checked by running it, first on jobs'
PATH, reported in the hello, and said at start when job users could not run it."""

from __future__ import annotations

import logging
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_harness import Agent
from click.testing import CliRunner

from bourse.agent import interpreter
from bourse.agent.daemon import AgentConfig
from bourse.agent.interpreter import JobPython
from bourse.agent.isolation import Isolation
from bourse.agent.users import UidPool
from bourse.cli.main import cli
from bourse.core.errors import InvalidInput

pytestmark = pytest.mark.anyio
WHERE = "import sys; print(sys.executable); print(sys.prefix)"


def test_the_agent_s_own_python_by_default() -> None:
    found = interpreter.find()
    assert found.path == os.path.abspath(sys.executable)  # its links kept: a venv's bin
    assert (found.version, found.prefix) == (platform.python_version(), sys.prefix)
    assert found.purelib == sysconfig.get_paths()["purelib"]
    assert found.tool().model_dump() == {"name": "python", "version": found.version,
                                         "path": found.path}


def test_a_name_is_looked_up_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    assert interpreter.find(os.path.basename(sys.executable)).path == sys.executable


def script(folder: Path, name: str, text: str, mode: int = 0o755) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(("make", "words"), [
    (lambda d: d / "missing", "no such file"),
    (lambda d: script(d, "python", "#!/bin/sh\n", 0o644), "is not executable"),
    (lambda d: script(d, "python", "#!/bin/sh\necho hello\n"), "is not a Python"),
    (lambda d: script(d, "python", "#!/bin/sh\necho oops >&2; exit 3\n"),
     r"is not a Python interpreter \(oops\)"),
    (lambda d: d, "no such file"),  # a directory
])
def test_what_is_not_a_python_is_refused(tmp_path: Path, make: Callable[[Path], Path],
                                         words: str) -> None:
    with pytest.raises(InvalidInput, match=words) as refused:
        interpreter.find(str(make(tmp_path)))
    assert refused.value.field == "--python"


def test_its_bin_goes_first_on_path_once() -> None:
    python = JobPython("/opt/venv/bin/python", "3.12.3", "/opt/venv", "/opt/venv/lib")
    assert python.first_on("/usr/bin:/opt/venv/bin:/bin") == "/opt/venv/bin:/usr/bin:/bin"
    assert interpreter.job_environ({"HOME": "/h"}, python)["PATH"].startswith(
        "/opt/venv/bin:/usr/local/sbin:")  # the agent's PATH was empty: the usual one


@pytest.fixture
def other_python(tmp_path: Path) -> JobPython:
    """Another Python than the agent's: a virtualenv of its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True)
    return interpreter.find(str(tmp_path / "venv" / "bin" / "python"))


async def test_a_job_s_python_is_the_chosen_one_whatever_the_agent_s_path(
        agent_factory: Callable[..., Agent], other_python: JobPython) -> None:
    """The agent's PATH (a hand-started agent's: no virtualenv on it) does not decide."""
    environ = interpreter.job_environ({"PATH": "/usr/bin:/bin"}, other_python)
    agent = agent_factory(environ=environ)
    await agent.start("j", ["python", "-c", WHERE])
    c = agent.coordinator
    await c.until(c.exited("j"))
    assert c.stream("j", "stdout").decode().splitlines() == [other_python.path,
                                                               other_python.prefix]


def test_the_agent_cli_refuses_a_python_that_is_not_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["agent", "--server", "http://127.0.0.1:1",
                                      "--work-dir", str(tmp_path), "--python",
                                      str(tmp_path / "nope")])
    assert result.exit_code == 2, result.output
    assert "--python" in result.stderr and "no such file" in result.stderr


def test_the_agent_cli_takes_it_from_the_environment(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[AgentConfig] = []

    async def run_agent(config: AgentConfig) -> None:
        seen.append(config)

    monkeypatch.setattr("bourse.cli.agent.run_agent", run_agent)
    python = str(Path(sys.executable).with_name("python3"))
    result = CliRunner().invoke(cli, ["agent", "--server", "http://127.0.0.1:1",
                                      "--work-dir", str(tmp_path)],
                                env={"BOURSE_AGENT_PYTHON": python})
    assert result.exit_code == 0, result.output
    assert seen[0].python is not None and seen[0].python.path == python


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A folder every user may enter (pytest's own temp root is private to its user)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as made:
        os.chmod(made, 0o755)
        yield Path(made)


def in_private_home(public_dir: Path) -> JobPython:
    home = public_dir / "root"
    (home / "venv" / "bin").mkdir(parents=True)
    os.chmod(home, 0o700)  # as /root is
    return JobPython(str(home / "venv" / "bin" / "python"), "3.12.3", str(home / "venv"), "")


def test_start_says_when_job_users_cannot_run_it(public_dir: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    python = in_private_home(public_dir)
    Path(python.path).write_text("")
    with caplog.at_level(logging.WARNING, logger="bourse.agent.interpreter"):
        why = interpreter.check_job_users(python, Isolation(UidPool(public_dir / "claims")))
    assert why is not None and f"cannot enter {public_dir / 'root'}" in why
    assert "--python" in caplog.text and "--job-users off" in caplog.text
    caplog.clear()
    assert interpreter.check_job_users(python, Isolation()) is None  # the agent's user runs
    assert caplog.text == ""  # jobs: nothing to say
