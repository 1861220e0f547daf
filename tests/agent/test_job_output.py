"""What a Python job prints reaches the spool as it prints it, and what it printed before it
was stopped, killed or crashed is kept: real Python processes under the runtime, a stand-in
coordinator reading the spool. Python buffers stdout in blocks when it is a file (as the
shim makes it) unless ``PYTHONUNBUFFERED`` is set, which every job gets by default."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from agent_harness import Agent

from bourse.agent.attempt import job_env
from bourse.protocol.agent import StartJob
from bourse.protocol.common import JobSpec

pytestmark = pytest.mark.anyio

# print() alone, no flush: what a third-party script does
SLOW_PRINTER = """\
import os, time
print("line 1")
while not os.path.exists("go"):
    time.sleep(0.01)
print("line 2")
"""
PRINT_THEN_BLOCK = """\
import os, signal, sys, time
if sys.argv[1] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("working on it")
sys.stdout.write("no newline yet")
sys.stderr.write("a warning\\n")
open("printed", "w").close()
if sys.argv[1] == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
time.sleep(600)
"""


def python(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


async def test_a_python_job_s_lines_arrive_while_it_runs(agent: Agent) -> None:
    await agent.start("j", python(SLOW_PRINTER))
    c = agent.coordinator
    await c.until(lambda: c.stream("j", "stdout") == b"line 1\n")
    assert c.event("j", "exited") is None  # it waits for go: the line came while it ran
    (agent.dir("j").work / "go").touch()
    await c.until(c.exited("j"))
    assert c.stream("j", "stdout") == b"line 1\nline 2\n"


@pytest.mark.parametrize(("how", "grace_s", "ended"), [
    ("stay", 10.0, {"exit_code": 143, "signal": None, "reason": "cancelled"}),  # SIGTERM
    ("ignore-term", 0.2, {"exit_code": None, "signal": 9, "reason": "cancelled"}),  # SIGKILL
    ("crash", None, {"exit_code": 139, "signal": None, "reason": "exited with code 139"}),
])
async def test_what_a_job_printed_before_it_was_stopped_is_kept(
        agent: Agent, how: str, grace_s: float | None, ended: dict[str, object]) -> None:
    await agent.start("j", python(PRINT_THEN_BLOCK, how))
    c = agent.coordinator
    printed = agent.dir("j").work / "printed"
    await c.until(lambda: printed.exists() or c.event("j", "exited") is not None)
    if grace_s is not None:
        await agent.runtime.cancel("j", 1, grace_s=grace_s)
    await c.until(c.exited("j"))
    exited = c.event("j", "exited")
    assert exited is not None
    assert {k: exited["data"][k] for k in ended} == ended
    assert c.stream("j", "stdout") == b"working on it\nno newline yet"  # the final drain
    assert c.stream("j", "stderr").startswith(b"a warning\n")  # then sh's "Terminated"...


def env_of(spec_env: dict[str, str]) -> dict[str, str]:
    msg = StartJob(job_id="j", attempt=1, spec=JobSpec(command=["x"], env=spec_env))
    return job_env({"PATH": "/bin"}, Path("/t"), msg)


def test_python_output_is_unbuffered_unless_the_spec_says_otherwise() -> None:
    assert env_of({})["PYTHONUNBUFFERED"] == "1"
    assert env_of({"PYTHONUNBUFFERED": ""})["PYTHONUNBUFFERED"] == ""  # the opt-out


@pytest.mark.parametrize(("spec_env", "unbuffered"), [({}, b"True"),
                                                     ({"PYTHONUNBUFFERED": ""}, b"False")])
async def test_the_job_s_python_sees_the_setting(agent_factory: Callable[..., Agent],
                                                 spec_env: dict[str, str],
                                                 unbuffered: bytes) -> None:
    agent = agent_factory()
    await agent.start("j", python("import sys; print(sys.stdout.write_through)"),
                      spec_env=spec_env)
    c = agent.coordinator
    await c.until(c.exited("j"))
    assert c.stream("j", "stdout") == unbuffered + b"\n"
