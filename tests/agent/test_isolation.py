"""Isolation on the node: jobs of a root agent run as their own users (real processes, real
uids, a real tmpfs); an agent that is not root says what it cannot guarantee.

The tests that run jobs as other users need root (CI runs as root); elsewhere they skip."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import shutil
import stat
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_harness import Agent

from bourse.agent import users
from bourse.agent.envs import shared
from bourse.agent.execs import Beside, run_exec
from bourse.agent.isolation import (
    SHARED_USER_GAPS,
    Isolation,
    check_tmpfs,
    decide,
    for_agent,
    unreachable,
)
from bourse.agent.shim import AttemptDir
from bourse.agent.users import UidPool, processes_of
from bourse.core.errors import InvalidInput
from bourse.protocol.stream import ExecTarget, StreamData
from bourse.tunnel.stream import Stream

ROOT = os.geteuid() == 0
async_test = pytest.mark.anyio
root_only = pytest.mark.skipif(not ROOT, reason="jobs run as their own users only under a "
                               "root agent; run the tests as root (CI does)")


def _job_python() -> str | None:
    """A Python that job users can run (the agent's may sit in a private home)."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        path = Path(candidate)
        if path.exists() and unreachable(path) is None and os.stat(path).st_mode & 0o001:
            return candidate
    return None


PYTHON = _job_python()
needs_python = pytest.mark.skipif(PYTHON is None, reason="no Python that other users can run")

SPY = """\
import os, sys
out = []
for name in ("TARGET_FILE", "SPOOL", "TARGET_DIR"):
    try:
        path = os.environ[name]
        os.listdir(path) if os.path.isdir(path) else open(path).read()
        out.append(name + ":read")
    except PermissionError:
        out.append(name + ":denied")
try:
    os.kill(int(os.environ["TARGET_PID"]), 9)
    out.append("kill:done")
except PermissionError:
    out.append("kill:denied")
out.append(f"uid:{os.getuid()} gid:{os.getgid()} groups:{os.getgroups()} umask:{os.umask(0):o}")
print(" ".join(out))
print(sorted(os.environ.items()))
"""


@pytest.fixture
def open_root() -> Iterator[Path]:
    """An agent root that other users can reach (pytest's tmp_path sits in a 0700 dir).
    Tests ask for it before ``agent_factory``, so that it is removed after the agents."""
    path = Path(tempfile.mkdtemp(prefix="bourse-isolation-", dir="/tmp"))
    os.chmod(path, 0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _pool() -> UidPool:
    """This xdist worker's own job users. The node's pool is machine-wide: under xdist, another
    worker's test (or a real root agent of an e2e test, which claims the lowest free uids)
    would claim a uid the moment this test's attempt released it, and its processes would pass
    for leftovers of this one. The claims stay in the real place, so they are still shared."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = users.FIRST_UID + 1000 + 100 * (int(worker) if worker.isdigit() else 0)
    return UidPool(first=first, count=100)


def _isolated(agent_factory: Callable[..., Agent], root: Path, tmpfs: str | None = None) -> Agent:
    """An agent over ``root`` whose jobs run as their own users; its state secured as the
    daemon secures it."""
    isolation = Isolation(_pool(), tmpfs)
    agent = agent_factory(root=root, isolation=isolation)
    isolation.secure(root)
    return agent


async def _gone(path: Path, agent: Agent) -> None:
    """``path`` is removed once the coordinator acknowledged the attempt's last rows (the
    daemon sweeps on every ack; here the stand-in coordinator acks, the test sweeps)."""
    def swept() -> bool:
        agent.runtime.sweep()
        return not path.exists()
    await agent.coordinator.until(swept)


@async_test
@root_only
@needs_python
async def test_two_jobs_cannot_read_or_signal_each_other_and_leave_nothing(
        open_root: Path, agent_factory: Callable[..., Agent],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_NODE_SECRET", "agent-credential-xyz")  # the agent's own env
    agent = _isolated(agent_factory, open_root)
    leftover = Path("/tmp") / f"bourse-isolation-leftover-{uuid.uuid4().hex}"
    await agent.start("b", ["sh", "-c", f'echo secret-of-b > b.txt; touch {leftover}; '
                                        'setsid sleep 300 & sleep 300'])
    b_dir = agent.dir("b")
    await agent.coordinator.until(lambda: (b_dir.work / "b.txt").exists() and leftover.exists())
    b_uid = os.stat(b_dir.work).st_uid
    await agent.coordinator.until(lambda: len(processes_of(b_uid)) >= 2)
    target = processes_of(b_uid)[0]
    await agent.start("a", [PYTHON, "-c", SPY], spec_env={
        "TARGET_FILE": str(b_dir.work / "b.txt"), "TARGET_DIR": str(b_dir.root),
        "SPOOL": str(open_root / "spool.db"), "TARGET_PID": str(target)})
    await agent.coordinator.until(agent.coordinator.exited("a"))
    out = agent.coordinator.stream("a", "stdout").decode()
    assert agent.coordinator.event("a", "exited")["data"]["exit_code"] == 0, out
    a_uid = int(out.split("uid:")[1].split()[0])
    assert "TARGET_FILE:denied SPOOL:denied TARGET_DIR:denied kill:denied" in out
    assert f"gid:{a_uid} groups:[] umask:77" in out
    assert a_uid not in (0, b_uid) and UidPool().owns(a_uid) and UidPool().owns(b_uid)
    assert "agent-credential-xyz" not in out and "BOURSE_NODE_SECRET" not in out
    await _gone(agent.dir("a").root.parent, agent)  # the attempt ended: its files are wiped
    assert processes_of(b_uid) and (b_dir.work / "b.txt").exists()  # B untouched by A

    await agent.runtime.cancel("b", 1, grace_s=0.2)
    await agent.coordinator.until(agent.coordinator.exited("b"))
    await _gone(b_dir.root, agent)
    assert processes_of(b_uid) == []  # even the one that left the job's process group
    assert not leftover.exists()


@async_test
@root_only
async def test_the_logs_stay_until_the_coordinator_acknowledged_them(
        open_root: Path, agent_factory: Callable[..., Agent]) -> None:
    agent = _isolated(agent_factory, open_root)
    agent.coordinator.ack = False
    await agent.start("l", ["sh", "-c", "echo out-line; echo err-line >&2"])
    await agent.coordinator.until(agent.coordinator.exited("l"))
    agent.runtime.sweep()
    adir = agent.dir("l")
    assert [p.name for p in adir.root.iterdir()] == ["logs"]  # the rest is wiped at once
    agent.coordinator.ack = True
    agent.coordinator.reconnect(agent.spool)  # everything is sent again, from the files
    await _gone(adir.root, agent)
    assert agent.coordinator.stream("l", "stdout") == b"out-line\n"
    assert agent.coordinator.stream("l", "stderr") == b"err-line\n"


@async_test
@root_only
async def test_a_restarted_agent_adopts_a_job_user_and_still_wipes_it(
        open_root: Path, agent_factory: Callable[..., Agent]) -> None:
    agent = _isolated(agent_factory, open_root)
    await agent.start("r", ["sh", "-c", "sleep 0.5; id -u"])
    await agent.coordinator.until(lambda: agent.coordinator.event("r", "started") is not None)
    uid = os.stat(agent.dir("r").work).st_uid
    await agent.restart()  # the job runs on; the new runtime knows its user by its files
    await agent.coordinator.until(agent.coordinator.exited("r"))
    assert agent.coordinator.stream("r", "stdout") == f"{uid}\n".encode()
    await _gone(agent.dir("r").root, agent)
    assert processes_of(uid) == []


@async_test
@root_only
async def test_a_tmpfs_work_dir_is_mounted_for_the_attempt_and_unmounted_after(
        open_root: Path, agent_factory: Callable[..., Agent]) -> None:
    agent = _isolated(agent_factory, open_root, tmpfs="8m")
    await agent.start("t", ["sh", "-c", 'stat -f -c %T . "$TMPDIR"; touch x'])
    await agent.coordinator.until(agent.coordinator.exited("t"))
    assert agent.coordinator.event("t", "exited")["data"]["exit_code"] == 0
    assert agent.coordinator.stream("t", "stdout").decode().split() == ["tmpfs", "tmpfs"]
    await _gone(agent.dir("t").root, agent)
    assert str(agent.dir("t").root) not in Path("/proc/mounts").read_text()


@async_test
@root_only
async def test_the_agents_state_is_its_own_and_symlinked_outputs_are_dropped(
        open_root: Path) -> None:
    pool = _pool()
    isolation = Isolation(pool)
    (open_root / "spool.db").write_text("keys")
    (open_root / "cache").mkdir()
    isolation.secure(open_root)
    assert stat.S_IMODE(os.stat(open_root).st_mode) == 0o711
    assert stat.S_IMODE(os.stat(open_root / "spool.db").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(open_root / "cache").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(open_root / "bundles").st_mode) == 0o700
    adir = AttemptDir.of(open_root / "work", "job", 1)
    adir.create()
    isolation.setup(adir)
    user = isolation.hand_over(adir)
    assert user is not None and os.stat(adir.work).st_uid == user.uid
    assert (os.stat(adir.root).st_uid, os.stat(adir.root).st_gid) == (0, user.gid)
    assert stat.S_IMODE(os.stat(adir.root).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(adir.work).st_mode) == 0o700
    (adir.root / "outputs" / "model").mkdir(parents=True)
    (adir.root / "outputs" / "model" / "w.bin").write_text("weights")
    (adir.root / "outputs" / "model" / "stolen").symlink_to(open_root / "spool.db")
    isolation.stop(adir)  # the agent uploads outputs as root: no link may lead it astray
    assert sorted(p.name for p in (adir.root / "outputs" / "model").iterdir()) == ["w.bin"]
    isolation.end(adir.root)  # the logs stay until the coordinator has them
    assert [p.name for p in adir.root.iterdir()] == ["logs"]
    assert (os.stat(adir.root).st_uid, stat.S_IMODE(os.stat(adir.root).st_mode)) == (0, 0o700)
    isolation.forget(adir.root)
    assert not adir.root.parent.exists()
    assert pool.claim(adir.root).uid == user.uid  # released: the first free one again
    pool.release(user, adir.root)


@async_test
@root_only
@needs_python
async def test_exec_beside_a_job_runs_as_its_user(open_root: Path) -> None:
    isolation = Isolation(_pool())
    adir = AttemptDir.of(open_root / "work", "job", 1)
    adir.create()
    isolation.setup(adir)
    user = isolation.hand_over(adir)
    assert user is not None
    sent: list[object] = []
    stream = Stream(1, sent.append)
    beside = Beside(adir.work, {"PATH": "/usr/bin:/bin"}, uid=user.uid)
    try:
        await asyncio.wait_for(run_exec(stream, ExecTarget(argv=["sh", "-c", "id -u; id -G"]),
                                        beside, lambda: None), 10)
    finally:
        isolation.end(adir.root)
        isolation.forget(adir.root)
    out = b"".join(base64.b64decode(m.data) for m in sent
                   if isinstance(m, StreamData) and m.fd == 1).decode()
    assert out.split() == [str(user.uid), str(user.gid)]


@pytest.mark.parametrize(("mode", "euid", "reachable", "isolated"), [
    ("auto", 0, None, True),
    ("on", 0, None, True),
    ("auto", 1000, None, False),
    ("auto", 0, "job users cannot enter /root", False),
    ("off", 0, None, False),
])
def test_the_mode_follows_root_and_the_work_dirs_reach(mode: str, euid: int,
                                                        reachable: str | None,
                                                        isolated: bool) -> None:
    decision = decide(mode, euid, reachable)
    assert decision.job_users is isolated
    assert decision.gaps == (() if isolated else SHARED_USER_GAPS)


@pytest.mark.parametrize(("mode", "euid", "reachable", "says"), [
    ("on", 1000, None, "the agent is not root"),
    ("on", 0, "job users cannot enter /root", "cannot enter /root"),
    ("sometimes", 0, None, "must be one of auto, on, off"),
])
def test_impossible_modes_say_why(mode: str, euid: int, reachable: str | None,
                                  says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        decide(mode, euid, reachable)


def test_an_agent_that_is_not_root_says_once_what_it_cannot_guarantee(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="bourse.agent.isolation"):
        isolation = for_agent("auto", None, tmp_path, euid=1000)
    assert isolation.pool is None and not isolation.wipes
    assert isolation.gaps == SHARED_USER_GAPS
    [record] = caplog.records
    assert "the agent is not root" in record.message
    assert "signal their processes" in record.message


def test_a_work_dir_in_a_private_home_is_unreachable(tmp_path: Path) -> None:
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    assert unreachable(private / "agent") == (
        f"job users cannot enter {private}, above the work dir {private / 'agent'}")


@pytest.mark.parametrize(("size", "euid", "says"), [
    ("8g", 1000, "needs the agent to run as root"),
    ("8x", 0, "is not a size"),
    ("0", 0, "is not a size"),
])
def test_a_tmpfs_needs_root_and_a_size(size: str, euid: int, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        check_tmpfs(size, euid)
    check_tmpfs(None, 1000)
    check_tmpfs("512m", 0)


def test_environments_are_readable_and_runnable_by_job_users_not_writable(
        tmp_path: Path) -> None:
    env = tmp_path / "envs" / "envs" / "abc"
    (env / "bin").mkdir(parents=True, mode=0o700)
    (env / "bin" / "python").write_text("#!/bin/sh\n")
    os.chmod(env / "bin" / "python", 0o700)  # as made under an agent's umask 077
    (env / "lib.py").write_text("x = 1\n")
    os.chmod(env / "lib.py", 0o600)
    (env / "bin" / "py").symlink_to("python")
    shared(env)
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(os.stat(p).st_mode)
             for p in (tmp_path / "envs", tmp_path / "envs" / "envs", env, env / "bin",
                       env / "bin" / "python", env / "lib.py")}
    assert modes == {"envs": 0o755, "envs/envs": 0o755, "envs/envs/abc": 0o755,
                     "envs/envs/abc/bin": 0o755, "envs/envs/abc/bin/python": 0o755,
                     "envs/envs/abc/lib.py": 0o644}


@root_only
@pytest.mark.parametrize("setpriv", [True, False], ids=["setpriv", "python-fallback"])
def test_the_drop_and_the_kill_work_with_and_without_setpriv(
        setpriv: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    if not setpriv:
        monkeypatch.setattr(users, "SETPRIV", None)
    elif users.SETPRIV is None:
        pytest.skip("no setpriv on this machine")
    # a uid per case: xdist may run the two at once, and each kills every process of its uid
    user = users.JobUser(users.FIRST_UID + 4000 + (0 if setpriv else 1))
    seen = subprocess.run(user.wrap(["/bin/sh", "-c", "id -u; id -G; umask"]), check=True,
                          capture_output=True, text=True).stdout.split()
    assert seen == [str(user.uid), str(user.gid), "0077"]
    missing = subprocess.run(user.wrap(["no-such-command-xyz"]), capture_output=True,
                             check=False, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert missing.returncode == 127
    sleeper = subprocess.Popen(user.wrap(["/bin/sleep", "60"]), start_new_session=True)
    try:
        wait_until(lambda: bool(processes_of(user.uid)))
        users.kill_all(user)
        assert processes_of(user.uid) == []
        assert sleeper.wait(timeout=10) == -9
    finally:
        if sleeper.poll() is None:
            sleeper.kill()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
