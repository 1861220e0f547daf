"""A network namespace joined to the host by a veth pair, with a firewall that drops every
inbound connection: a node behind NAT or a strict firewall, as far as the agent can tell.

Needs root, ``ip`` (iproute2) and ``nft`` (nftables). The names and the /30 derive from the
test process's pid, so parallel test workers (and leftovers of a crashed run) never collide.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import NoReturn

import pytest

LISTENER = """\
import socket, sys
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind((sys.argv[1], int(sys.argv[2])))
sock.listen()
print("listening", flush=True)
while True:
    sock.accept()[0].close()
"""
DIAL = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).close()"
INBOUND_DROP = [
    "add table inet bourse_e2e",
    "add chain inet bourse_e2e input { type filter hook input priority 0; policy drop; }",
    "add rule inet bourse_e2e input ct state established,related accept",
    "add rule inet bourse_e2e input iif lo accept",
]


def require_tools() -> None:
    """Fail (under CI) or skip (elsewhere) with the reason when this machine cannot do it."""
    missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        unavailable("network namespaces need root")
    if missing:
        unavailable(f"{' and '.join(missing)} not installed (iproute2, nftables)")


def unavailable(reason: str) -> NoReturn:
    message = f"cannot test an agent behind a firewall: {reason}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must provide it: see .ci/run)")
    pytest.skip(message)


def run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
    return done


class Netns:
    def __init__(self) -> None:
        pid = os.getpid()
        self.name = f"bourse-e2e-{pid}"
        self.host_if, self.ns_if = f"bse{pid}h", f"bse{pid}n"
        base = (pid % 16384) * 4  # one /30 of 10.203.0.0/16
        prefix = f"10.203.{base // 256}."
        self.host_ip, self.ns_ip = f"{prefix}{base % 256 + 1}", f"{prefix}{base % 256 + 2}"

    @property
    def prefix(self) -> list[str]:
        """What runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def create(self) -> None:
        self.delete()  # leftovers of a crashed run with the same pid
        try:
            run(["ip", "netns", "add", self.name])
        except AssertionError as exc:
            unavailable(f"cannot create a network namespace here: {exc}")
        for argv in (
            ["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if],
            ["ip", "link", "set", self.ns_if, "netns", self.name],
            ["ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if],
            ["ip", "link", "set", self.host_if, "up"],
            [*self.prefix, "ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if],
            [*self.prefix, "ip", "link", "set", self.ns_if, "up"],
            [*self.prefix, "ip", "link", "set", "lo", "up"],
        ):
            run(argv)

    def drop_inbound(self) -> None:
        for rule in INBOUND_DROP:
            try:
                run([*self.prefix, "nft", rule])
            except AssertionError as exc:
                unavailable(f"nftables does not work here: {exc}")

    def listen(self, port: int) -> subprocess.Popen[str]:
        """A TCP listener inside the namespace on its address; returns once it listens."""
        proc = subprocess.Popen([*self.prefix, sys.executable, "-c", LISTENER, self.ns_ip,
                                 str(port)], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "listening", "the listener did not start"
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[str]) -> None:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def dial_inside(self, host: str, port: int) -> bool:
        """Whether a connection made from inside the namespace to host:port succeeds."""
        return run([*self.prefix, sys.executable, "-c", DIAL, host, str(port)],
                   check=False).returncode == 0

    def delete(self) -> None:
        run(["ip", "link", "del", self.host_if], check=False)  # takes its peer with it
        run(["ip", "netns", "del", self.name], check=False)
