"""A small LAN for gang tests: ``count`` network namespaces (the nodes) joined by a Linux bridge,
plus the host on the same subnet, so that processes in the namespaces reach each other and a
coordinator listening on ``host_address``.

The bridge does not sit in the host's network namespace but in a namespace of its own (the
"switch"). Two reasons:

- With ``br_netfilter`` loaded (Docker loads it) the host's ``net.bridge.bridge-nf-call-iptables``
  is usually 1, which sends every frame crossing a bridge through the host's iptables/nft
  FORWARD chains; a FORWARD ``policy drop`` (Docker sets one) then silently drops the traffic
  between the nodes. An accept rule in a table of our own does not help (a drop in any base
  chain is final), and turning the sysctl off would change the host for everyone. In its own
  namespace the bridge meets only that namespace's netfilter: no rules at all, and the sysctl
  (per namespace since Linux 5.3) is turned off there too for good measure.
- Nothing of the host is touched but one veth, whose host end carries ``host_address``;
  deleting the namespaces takes everything else with it.

Needs root and ``ip`` (iproute2). The names and the /26 derive from the test process's pid, so
parallel test workers (and leftovers of a crashed run) never collide.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import NoReturn

import pytest

SUBNETS = ipaddress.ip_network("10.204.0.0/16")  # tests/e2e/netns.py has 10.203.0.0/16
SLOT_PREFIX = 26  # 1024 slots of 64 addresses: the host, then up to 61 nodes
BRIDGE = "br0"  # inside the switch namespace, so it needs no unique name
NO_BRIDGE_NETFILTER = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
                       "net.bridge.bridge-nf-call-arptables")
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
DIAL = """\
import socket, sys
socket.create_connection((sys.argv[1], int(sys.argv[2])), float(sys.argv[3])).close()
"""


def require_tools() -> None:
    """Fail (under CI) or skip (elsewhere) with the reason when this machine cannot do it."""
    if os.geteuid() != 0:
        unavailable("network namespaces need root")
    if shutil.which("ip") is None:
        unavailable("ip not installed (iproute2)")


def unavailable(reason: str) -> NoReturn:
    message = f"cannot test a gang across network namespaces: {reason}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must provide it: see .ci/run)")
    pytest.skip(message)


def run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
    return done


def slot_network(pid: int) -> ipaddress.IPv4Network:
    size = 2 ** (32 - SLOT_PREFIX)
    first = SUBNETS.network_address + (pid % (SUBNETS.num_addresses // size)) * size
    return ipaddress.IPv4Network(f"{first}/{SLOT_PREFIX}")


class Bridge:
    """``count`` namespaces on one bridge; the host holds ``host_address`` on the same subnet."""

    def __init__(self, count: int) -> None:
        pid = os.getpid()
        self.network = slot_network(pid)
        if not 1 <= count <= self.network.num_addresses - 3:
            raise ValueError(f"count must be between 1 and {self.network.num_addresses - 3}")
        self.count = count
        self.stem = f"bourse-gang-{pid}-"
        self.switch = f"{self.stem}sw"
        self.host_if = f"bgh{pid}"  # at most 10 characters: pids stay under 2**22
        self.host_address = str(self.network[1])

    def name(self, i: int) -> str:
        """The network namespace of node ``i``."""
        return f"{self.stem}{self._index(i)}"

    def prefix(self, i: int) -> list[str]:
        """What runs a command inside node ``i``'s namespace."""
        return ["ip", "netns", "exec", self.name(i)]

    def address(self, i: int) -> str:
        return str(self.network[2 + self._index(i)])

    def ifname(self, i: int) -> str:
        """The interface inside node ``i``'s namespace that carries ``address(i)``."""
        return f"gang{self._index(i)}"

    def create(self) -> None:
        self.delete()  # leftovers of a crashed run with the same pid
        self._refuse_taken_subnet()
        try:
            run(["ip", "netns", "add", self.switch])
        except AssertionError as exc:
            unavailable(f"cannot create a network namespace here: {exc}")
        self._make_switch()
        for i in range(self.count):
            self._make_node(i)

    def cut(self, i: int) -> None:
        """Unplug node ``i``'s cable at the switch: both sides see silence, not an error."""
        run(["ip", "-n", self.switch, "link", "set", self._port(i), "down"])

    def heal(self, i: int) -> None:
        run(["ip", "-n", self.switch, "link", "set", self._port(i), "up"])

    def listen(self, i: int, port: int) -> subprocess.Popen[str]:
        """A TCP listener inside node ``i`` on its address; returns once it listens."""
        proc = subprocess.Popen([*self.prefix(i), sys.executable, "-c", LISTENER,
                                 self.address(i), str(port)], stdout=subprocess.PIPE, text=True,
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

    def dial(self, i: int, host: str, port: int, timeout_s: float = 2.0) -> bool:
        """Whether a connection made from inside node ``i`` to host:port succeeds."""
        return run([*self.prefix(i), sys.executable, "-c", DIAL, host, str(port),
                    str(timeout_s)], check=False).returncode == 0

    def delete(self) -> None:
        """Remove everything this pid made, whatever ``count`` a crashed run had."""
        run(["ip", "link", "del", self.host_if], check=False)  # takes its peer with it
        listed = run(["ip", "netns", "list"], check=False).stdout.split("\n")
        for name in (line.split(" ")[0] for line in listed):
            if name.startswith(self.stem):
                run(["ip", "netns", "del", name], check=False)

    def _make_switch(self) -> None:
        inside = ["ip", "-n", self.switch]
        run([*inside, "link", "add", BRIDGE, "type", "bridge", "nf_call_iptables", "0",
             "nf_call_ip6tables", "0", "nf_call_arptables", "0"])
        for key in NO_BRIDGE_NETFILTER:  # absent without br_netfilter: nothing to turn off
            run(["ip", "netns", "exec", self.switch, "sysctl", "-qw", f"{key}=0"], check=False)
        run(["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", "host",
             "netns", self.switch])
        run(["ip", "addr", "add", f"{self.host_address}/{SLOT_PREFIX}", "dev", self.host_if])
        run(["ip", "link", "set", self.host_if, "up"])
        for device in ("host", BRIDGE):
            run([*inside, "link", "set", device, "up"])
        run([*inside, "link", "set", "host", "master", BRIDGE])

    def _make_node(self, i: int) -> None:
        name, ifname = self.name(i), self.ifname(i)
        run(["ip", "netns", "add", name])
        run(["ip", "-n", self.switch, "link", "add", self._port(i), "type", "veth", "peer",
             "name", ifname, "netns", name])
        run(["ip", "-n", self.switch, "link", "set", self._port(i), "master", BRIDGE, "up"])
        inside = ["ip", "-n", name]
        run([*inside, "addr", "add", f"{self.address(i)}/{SLOT_PREFIX}", "dev", ifname])
        run([*inside, "link", "set", ifname, "up"])
        run([*inside, "link", "set", "lo", "up"])

    def _refuse_taken_subnet(self) -> None:
        shown = run(["ip", "-o", "-4", "addr", "show"]).stdout
        for line in shown.splitlines():
            fields = line.split()
            if ipaddress.ip_interface(fields[3]).network.overlaps(self.network):
                raise AssertionError(f"{self.network} is already on {fields[1]} (another test "
                                     f"process whose pid has the same slot?): delete it first")

    def _port(self, i: int) -> str:
        return f"node{self._index(i)}"

    def _index(self, i: int) -> int:
        if not 0 <= i < self.count:
            raise IndexError(f"node {i} of a bridge of {self.count}")
        return i
