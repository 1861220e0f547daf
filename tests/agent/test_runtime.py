"""The runtime on real processes in temp dirs, with a stand-in coordinator reading the spool."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_harness import Agent
from pydantic import ValidationError

from bourse.agent import shim
from bourse.agent.attempt import (
    LOST_REASON,
    StartError,
    exit_info,
    gpu_env,
    job_env,
    resolve_workdir,
)
from bourse.agent.spool import AttemptRecord, AttemptStatus
from bourse.protocol.agent import StartJob
from bourse.protocol.common import AttemptRef, JobSpec

pytestmark = pytest.mark.anyio

WAIT_FOR_GO = "echo before; while [ ! -f go ]; do sleep 0.01; done; echo after; exit 4"


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def kinds(agent: Agent, job_id: str = "j") -> list[str]:
    return [e["kind"] for e in agent.coordinator.events(job_id)]


# --- pure parts ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("file_status", "wait_status", "cancel", "expected"), [
    (0, 0, None, {"exit_code": 0, "signal": None, "reason": "exited with code 0"}),
    (143, 143 << 8, "user", {"exit_code": 143, "signal": None, "reason": "user"}),
    (None, signal.SIGKILL, None, {"exit_code": None, "signal": 9,
                                  "reason": "killed by SIGKILL"}),
    (None, 2 << 8, None, {"exit_code": 2, "signal": None, "reason": "exited with code 2"}),
    (None, None, None, {"exit_code": None, "signal": None, "reason": LOST_REASON}),
    (None, None, "timeout", {"exit_code": None, "signal": None, "reason": "timeout"}),
])
async def test_exit_info(file_status: int | None, wait_status: int | None, cancel: str | None,
                         expected: dict[str, object]) -> None:
    assert exit_info(file_status, wait_status, cancel) == expected


def without_time(event: dict[str, Any] | None) -> dict[str, Any]:
    """An ``exited`` event's data less the time the process exited (checked elsewhere)."""
    assert event is not None and isinstance(event["data"]["exited_at"], float)
    return {k: v for k, v in event["data"].items() if k != "exited_at"}


async def test_resolve_workdir(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert resolve_workdir(tmp_path, "") == tmp_path.resolve()
    assert resolve_workdir(tmp_path, "a/b") == (tmp_path / "a" / "b").resolve()
    with pytest.raises(StartError, match="outside"):
        resolve_workdir(tmp_path / "a", "../..")
    with pytest.raises(StartError, match="does not exist"):
        resolve_workdir(tmp_path, "nope")


async def test_job_env_layers() -> None:
    msg = StartJob(job_id="j", attempt=1, env={"BOURSE_JOB_ID": "j", "X": "exchange"},
                   spec=JobSpec(command=["true"], env={"X": "spec", "Y": "spec"}))
    assert job_env({"PATH": "/bin", "Y": "base"}, Path("/t"), msg) == {
        "PATH": "/bin", "TMPDIR": "/t", "PYTHONUNBUFFERED": "1", "X": "exchange", "Y": "spec",
        "BOURSE_JOB_ID": "j"}


def test_gpu_env_shows_the_given_devices_and_hides_the_rest() -> None:
    mig = "MIG-GPU-00000000-0000-0000-0000-000000000000/9/0"
    assert gpu_env(["GPU-aa", mig]) == {
        "CUDA_VISIBLE_DEVICES": f"GPU-aa,{mig}", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "NVIDIA_VISIBLE_DEVICES": f"GPU-aa,{mig}"}
    assert gpu_env([]) == {"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                           "NVIDIA_VISIBLE_DEVICES": "void"}  # a CPU job on a GPU node
    assert gpu_env(None) == {}  # an older coordinator: nothing said, nothing hidden


async def test_the_exchange_s_devices_win_over_the_spec_s() -> None:
    msg = StartJob(job_id="j", attempt=1, gpus=["GPU-bb"], spec=JobSpec(
        command=["true"], env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}))
    assert job_env({}, Path("/t"), msg)["CUDA_VISIBLE_DEVICES"] == "GPU-bb"


def test_start_job_refuses_a_device_list_cuda_would_misread() -> None:
    with pytest.raises(ValidationError):
        StartJob(job_id="j", attempt=1, gpus=["GPU-aa,GPU-bb"], spec=JobSpec(command=["x"]))
    old = StartJob.model_validate({"job_id": "j", "attempt": 1, "spec": {"command": ["x"]}})
    assert old.gpus is None  # an older coordinator's StartJob


# --- running jobs -------------------------------------------------------------------------------

async def test_output_is_spooled_exactly_then_the_exit(agent: Agent) -> None:
    script = "for i in $(seq 1 300); do echo out $i; echo err $i >&2; done; printf tail; exit 0"
    await agent.start("j", sh(script))
    c = agent.coordinator
    await c.until(c.exited("j"))
    adir = agent.dir("j")
    assert c.stream("j", "stdout") == adir.stdout.read_bytes()
    assert c.stream("j", "stderr") == adir.stderr.read_bytes()
    assert adir.stdout.read_bytes().endswith(b"out 300\ntail")
    items = c.items("j")
    assert [b["seq"] for b in items] == list(range(len(items)))
    assert [k for k in c.order if k[0] == "j"] == sorted(k for k in c.order if k[0] == "j")
    assert kinds(agent)[:2] == ["accepted", "started"]
    assert items[-1]["kind"] == "exited"
    started = c.event("j", "started")
    assert started is not None and started["time"] <= items[-1]["data"]["exited_at"] \
        <= items[-1]["time"]  # when the process ended, before the outputs went up
    assert without_time(items[-1]) == {
        "exit_code": 0, "signal": None, "reason": "exited with code 0"}
    assert c.event("j", "started")["data"]["pid"] > 0  # type: ignore[index]


async def test_non_zero_exit_and_missing_command(agent: Agent) -> None:
    await agent.start("fails", sh("exit 3"))
    await agent.start("missing", ["no-such-command-xyz"])
    c = agent.coordinator
    await c.until(lambda: c.exited("fails")() and c.exited("missing")())
    assert c.event("fails", "exited")["data"]["exit_code"] == 3  # type: ignore[index]
    assert c.event("missing", "exited")["data"]["exit_code"] == 127  # type: ignore[index]
    assert b"not found" in c.stream("missing", "stderr")


async def test_cancel_lets_the_job_handle_sigterm(agent: Agent) -> None:
    await agent.start("j", sh("trap 'echo bye; exit 0' TERM; echo ready; "
                              "while :; do sleep 0.01; done"))
    c = agent.coordinator
    await c.until(lambda: b"ready" in c.stream("j", "stdout"))
    await agent.runtime.cancel("j", 1, grace_s=10, reason="user asked")
    await c.until(c.exited("j"))
    assert without_time(c.event("j", "exited")) == {
        "exit_code": 0, "signal": None, "reason": "user asked", "signalled": True}
    assert c.stream("j", "stdout") == b"ready\nbye\n"


async def test_cancel_kills_a_job_ignoring_sigterm_after_the_grace(agent: Agent) -> None:
    await agent.start("j", sh("trap '' TERM; echo ready; sleep 30"))
    c = agent.coordinator
    await c.until(lambda: b"ready" in c.stream("j", "stdout"))
    began = time.monotonic()
    await agent.runtime.cancel("j", 1, grace_s=0.2)
    await c.until(c.exited("j"))
    assert time.monotonic() - began >= 0.2
    assert without_time(c.event("j", "exited")) == {
        "exit_code": None, "signal": 9, "reason": "cancelled", "signalled": True}


async def test_stale_cancel_kills_and_reports_nothing_more(agent: Agent) -> None:
    await agent.start("j", sh("echo ready; exec sleep 30"))
    c = agent.coordinator
    await c.until(lambda: b"ready" in c.stream("j", "stdout"))
    record = agent.spool.get_attempt("j", 1)
    assert record is not None and record.pid is not None
    await agent.runtime.cancel("j", 1, grace_s=0.1, stale=True)
    await c.until(lambda: not shim.is_alive(record.pid, record.proc_start))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    c.poll()
    assert "exited" not in kinds(agent)
    assert agent.runtime.running() == []
    assert agent.spool.get_attempt("j", 1).state is AttemptStatus.STALE  # type: ignore[union-attr]


async def test_the_job_sees_only_its_own_environment(agent: Agent,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_SECRET", "s3cret")
    await agent.start("j", ["env"], env={"BOURSE_JOB_ID": "j"}, spec_env={"FOO": "bar"})
    c = agent.coordinator
    await c.until(c.exited("j"))
    env = dict(line.split("=", 1) for line in c.stream("j", "stdout").decode().splitlines())
    assert "AGENT_SECRET" not in env
    assert env["BOURSE_JOB_ID"] == "j"
    assert env["FOO"] == "bar"
    assert env["TMPDIR"] == str(agent.dir("j").tmp)
    assert env["BOURSE_TRACK_FILE"] == str(agent.dir("j").tmp / "bourse-track.jsonl")
    assert set(env) <= {"PATH", "HOME", "LANG", "TMPDIR", "BOURSE_JOB_ID", "FOO", "PWD",
                        "PYTHONUNBUFFERED", "BOURSE_TRACK_FILE"}


async def test_a_process_job_sees_the_devices_it_was_given(agent: Agent) -> None:
    mig = "MIG-GPU-00000000-0000-0000-0000-000000000000/10/0"
    await agent.start("g", ["env"], gpus=[mig])
    await agent.start("c", ["env"], gpus=[])
    c = agent.coordinator
    await c.until(lambda: c.exited("g")() and c.exited("c")())
    for job, devices, nvidia in (("g", mig, mig), ("c", "", "void")):
        env = dict(line.split("=", 1) for line in c.stream(job, "stdout").decode().splitlines())
        assert (env["CUDA_VISIBLE_DEVICES"], env["NVIDIA_VISIBLE_DEVICES"]) == (devices, nvidia)


def make_bundle(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


SHA = "0" * 64


async def test_bundle_is_extracted_and_workdir_entered(agent: Agent, tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b.tar.gz", {
        "sub/run.sh": b'echo "in $(basename "$PWD")"; cat data.txt\n', "sub/data.txt": b"42\n"})
    await agent.start("j", ["sh", "run.sh"], bundle=bundle, bundle_sha=SHA, workdir="sub")
    c = agent.coordinator
    await c.until(c.exited("j"))
    assert c.stream("j", "stdout") == b"in sub\n42\n"
    assert c.event("j", "exited")["data"]["exit_code"] == 0  # type: ignore[index]


@pytest.mark.parametrize(("files", "workdir", "reason"), [
    (None, "", "was not provided"),
    ({"../evil": b"x"}, "", "cannot extract"),
    ({"a.txt": b"x"}, "sub", "does not exist"),
    (b"not a tarball", "", "cannot extract"),
])
async def test_start_failures(agent: Agent, tmp_path: Path, files: dict[str, bytes] | bytes | None,
                              workdir: str, reason: str) -> None:
    bundle: Path | None = None
    if isinstance(files, bytes):
        bundle = tmp_path / "bad.tar.gz"
        bundle.write_bytes(files)
    elif files is not None:
        bundle = make_bundle(tmp_path / "b.tar.gz", files)
    await agent.start("j", ["true"], bundle=bundle, bundle_sha=SHA, workdir=workdir)
    agent.coordinator.poll()
    assert kinds(agent) == ["accepted", "start_failed"]
    assert reason in agent.coordinator.event("j", "start_failed")["data"]["reason"]  # type: ignore[index]
    assert not (tmp_path.parent / "evil").exists()


async def test_reject_records_a_start_failure(agent: Agent) -> None:
    msg = StartJob(job_id="j", attempt=1, spec=JobSpec(command=["true"], bundle=SHA))
    agent.runtime.reject(msg, "bundle download failed")
    agent.runtime.reject(msg, "again")
    await agent.runtime.start(msg)
    assert agent.runtime.running() == [AttemptRef(job_id="j", attempt=1)]
    agent.coordinator.poll()
    assert kinds(agent) == ["start_failed"]
    assert agent.coordinator.event("j", "start_failed")["data"] == {  # type: ignore[index]
        "reason": "bundle download failed"}
    assert agent.runtime.running() == []


async def test_start_is_idempotent(agent: Agent) -> None:
    await agent.start("j", sh("sleep 0.1"))
    await agent.start("j", sh("sleep 0.1"))
    c = agent.coordinator
    await c.until(c.exited("j"))
    await agent.start("j", sh("sleep 0.1"))
    c.poll()
    assert kinds(agent) == ["accepted", "started", "exited"]


async def test_cancel_while_preparing_reports_an_exit_without_running(agent: Agent,
                                                                      tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b.tar.gz", {"a": b"x"})
    msg = StartJob(job_id="j", attempt=1, spec=JobSpec(command=["touch", "ran"], bundle=SHA))
    start = asyncio.create_task(agent.runtime.start(msg, bundle))
    await asyncio.sleep(0)  # start() is now extracting in a thread
    await agent.runtime.cancel("j", 1, reason="changed my mind")
    await start
    agent.coordinator.poll()
    assert kinds(agent) == ["accepted", "exited"]
    assert agent.coordinator.event("j", "exited")["data"]["reason"] == "changed my mind"  # type: ignore[index]
    assert not (agent.dir("j").work / "ran").exists()


async def test_stale_cancel_while_preparing_starts_nothing(agent: Agent, tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "b.tar.gz", {"a": b"x"})
    msg = StartJob(job_id="j", attempt=1, spec=JobSpec(command=["touch", "ran"], bundle=SHA))
    start = asyncio.create_task(agent.runtime.start(msg, bundle))
    await asyncio.sleep(0)
    await agent.runtime.cancel("j", 1, stale=True)
    await agent.runtime.cancel("other", 1)  # unknown attempts are ignored
    await start
    agent.coordinator.poll()
    assert kinds(agent) == []  # even ``accepted``, unsent, was dropped
    assert agent.runtime.running() == []
    assert not (agent.dir("j").work / "ran").exists()


async def test_running_keeps_an_attempt_until_its_exit_is_acked(agent: Agent) -> None:
    c = agent.coordinator
    c.ack = False
    await agent.start("j", ["true"])
    assert agent.runtime.running() == [AttemptRef(job_id="j", attempt=1)]
    await c.until(c.exited("j"))
    rows = agent.spool.pending()
    agent.spool.ack([r.id for r in rows[:-1]])
    assert agent.runtime.running() == [AttemptRef(job_id="j", attempt=1)]
    agent.spool.ack([rows[-1].id])
    assert agent.runtime.running() == []


# --- agent restarts -----------------------------------------------------------------------------

async def test_a_restarted_agent_adopts_a_running_job(agent: Agent) -> None:
    c = agent.coordinator
    c.ack = False  # what was sent but not acked is sent again after the restart
    await agent.start("j", sh(WAIT_FOR_GO))
    await c.until(lambda: c.stream("j", "stdout") == b"before\n")
    await agent.restart()
    c.ack = True
    (agent.dir("j").work / "go").touch()
    await c.until(c.exited("j"))
    assert c.stream("j", "stdout") == b"before\nafter\n"
    items = c.items("j")
    assert [b["seq"] for b in items] == list(range(len(items)))
    assert kinds(agent) == ["accepted", "started", "exited"]
    assert items[-1]["data"]["exit_code"] == 4
    assert agent.runtime.running() == []


async def test_a_restarted_agent_reports_a_job_that_ended_meanwhile(agent: Agent) -> None:
    c = agent.coordinator
    await agent.start("j", sh("echo before; while [ ! -f go ]; do sleep 0.01; done; "
                              "printf 'after\\nno newline'; exit 5"))
    await c.until(lambda: c.stream("j", "stdout") == b"before\n")
    await agent.stop()
    adir = agent.dir("j")
    (adir.work / "go").touch()
    deadline = time.monotonic() + 5
    while shim.read_int(adir.exit_file) is None:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    await agent.restart()
    await c.until(c.exited("j"))
    assert c.stream("j", "stdout") == b"before\nafter\nno newline"
    assert c.event("j", "exited")["data"]["exit_code"] == 5  # type: ignore[index]


async def test_adopt_finishes_an_attempt_caught_between_spawn_and_record(agent: Agent) -> None:
    """The last agent died after spawning the shim but before recording its pid."""
    for job_id, spawned in (("spawned", True), ("never", False)):
        adir = agent.dir(job_id)
        agent.spool.put_attempt(AttemptRecord(job_id, 1, spec="{}", dir=str(adir.root),
                                              state=AttemptStatus.STARTING,
                                              created=time.time()))
        adir.create()
        if spawned:
            shim.spawn(adir, adir.work, sh("echo hi; exit 6"), {})
            while shim.read_int(adir.pid_file) is None:
                await asyncio.sleep(0.005)
    await agent.runtime.adopt()
    c = agent.coordinator
    await c.until(c.exited("spawned"))
    assert kinds(agent, "spawned") == ["started", "exited"]
    assert c.event("spawned", "exited")["data"]["exit_code"] == 6  # type: ignore[index]
    assert c.stream("spawned", "stdout") == b"hi\n"
    assert kinds(agent, "never") == ["start_failed"]


AGENT = textwrap.dedent("""
    import asyncio, pathlib, sys
    from bourse.agent.runtime import Runtime
    from bourse.agent.spool import Spool
    from bourse.protocol.agent import StartJob

    async def main():
        root = pathlib.Path(sys.argv[1])
        spool = Spool(root / "spool.db")
        runtime = Runtime(root / "work", spool, poll_interval=0.01)
        for msg in sys.argv[2:]:
            await runtime.start(StartJob.model_validate_json(msg))
        while any(r.stdout_offset == 0 for r in spool.attempts()):
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
""")


async def test_adoption_after_the_agent_is_killed_9(agent_factory: Callable[..., Agent]) -> None:
    agent = agent_factory()
    msgs = [StartJob(job_id=j, attempt=1, spec=JobSpec(command=sh(WAIT_FOR_GO)))
            for j in ("survives", "killed")]
    proc = subprocess.Popen([sys.executable, "-c", AGENT, str(agent.root),
                             *(m.model_dump_json() for m in msgs)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = agent.spool.get_attempt("killed", 1)
    assert killed is not None and killed.pid is not None
    shim.signal_group(killed.pid, signal.SIGKILL)  # the job and its shim die with the agent away
    await agent.runtime.adopt()
    (agent.dir("survives").work / "go").touch()
    c = agent.coordinator
    await c.until(lambda: c.exited("survives")() and c.exited("killed")())
    assert c.stream("survives", "stdout") == b"before\nafter\n"
    assert c.event("survives", "exited")["data"]["exit_code"] == 4  # type: ignore[index]
    assert without_time(c.event("killed", "exited")) == {
        "exit_code": None, "signal": None, "reason": LOST_REASON}
    for job in ("survives", "killed"):
        items = c.items(job)
        assert [b["seq"] for b in items] == list(range(len(items)))


# --- volume -------------------------------------------------------------------------------------

async def test_large_output_is_complete_and_bounded(agent_factory: Callable[..., Agent]) -> None:
    chunk, cap, size = 64 * 1024, 1024 * 1024, 20_000_000
    agent = agent_factory(chunk_bytes=chunk, max_pending_log_bytes=cap)
    began = time.monotonic()
    await agent.start("j", sh(f"yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {size}"))
    c = agent.coordinator
    most = 0

    def done() -> bool:
        nonlocal most
        most = max(most, agent.spool.pending_log_bytes("j", 1))
        return c.exited("j")()

    await c.until(done, timeout=15)
    elapsed = time.monotonic() - began
    out = c.stream("j", "stdout")
    assert len(out) == size
    assert out == agent.dir("j").stdout.read_bytes()
    assert most <= cap + chunk
    print(f"\n{size / elapsed / 1e6:.0f} MB/s through the spool, acked as sent")
