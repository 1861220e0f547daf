"""The test ground of gang jobs: nodes in network namespaces on one bridge (bridge.py). The
DDP scripts run across them through the exchange in test_gang_netns.py; members.py runs them by
hand, to reproduce the traps NOTES.md describes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge import Bridge, require_tools, run, unavailable

PORT = 7000  # every node has its own port space: no clash with other tests

# Runs inside a namespace that stands for the host, with br_netfilter's hook on and a FORWARD
# drop policy (what Docker leaves on a host): a Bridge made there must still carry the traffic.
BEHIND_FORWARD_DROP = """\
import sys
sys.path.insert(0, sys.argv[1])
from bridge import Bridge, run
run(["nft", "add table inet gang_fw"])
run(["nft", "add chain inet gang_fw forward { type filter hook forward priority 0; policy drop; }"])
print("hook", open("/proc/sys/net/bridge/bridge-nf-call-iptables").read().strip())
bridge = Bridge(2)
try:
    bridge.create()
    listener = bridge.listen(1, 7000)
    print("dial", bridge.dial(0, bridge.address(1), 7000))
    bridge.stop(listener)
finally:
    bridge.delete()
"""


@pytest.fixture
def bridge3() -> Iterator[Bridge]:
    require_tools()
    made = Bridge(3)
    try:
        made.create()
        yield made
    finally:
        made.delete()


@pytest.fixture
def host_listener(bridge3: Bridge) -> Iterator[int]:
    """A listener on the host at the bridge's address (where a coordinator would listen)."""
    with socket.socket() as sock:
        sock.bind((bridge3.host_address, 0))
        sock.listen()
        yield sock.getsockname()[1]


def listening(bridge: Bridge) -> list[subprocess.Popen[str]]:
    return [bridge.listen(i, PORT) for i in range(bridge.count)]


def dials_again(bridge: Bridge, i: int, host: str, port: int) -> bool:
    """Whether node ``i`` reaches host:port within a few tries: right after a heal the first
    SYN or ARP request can be lost (NOTES.md), as after a cable is plugged back in."""
    return any(bridge.dial(i, host, port) for _ in range(4))


def test_nodes_reach_each_other_and_the_host(bridge3: Bridge, host_listener: int) -> None:
    listeners = listening(bridge3)
    try:
        for i in range(3):
            for j in range(3):
                assert bridge3.dial(i, bridge3.address(j), PORT), f"node {i} cannot reach {j}"
            assert bridge3.dial(i, bridge3.host_address, host_listener), f"node {i}: no host"
    finally:
        for listener in listeners:
            bridge3.stop(listener)


def test_each_node_has_its_address_on_its_interface(bridge3: Bridge) -> None:
    for i in range(3):
        shown = run([*bridge3.prefix(i), "ip", "-o", "-4", "addr", "show", "dev",
                     bridge3.ifname(i)]).stdout
        assert f"inet {bridge3.address(i)}/" in shown
        assert "<LOOPBACK,UP," in run([*bridge3.prefix(i), "ip", "link", "show", "lo"]).stdout


def test_a_cut_node_is_silent_until_healed(bridge3: Bridge, host_listener: int) -> None:
    listeners = listening(bridge3)
    try:
        bridge3.cut(1)
        assert not bridge3.dial(0, bridge3.address(1), PORT, timeout_s=1)
        assert not bridge3.dial(1, bridge3.host_address, host_listener, timeout_s=1)
        assert bridge3.dial(0, bridge3.address(2), PORT), "the cut took the others down too"
        assert bridge3.dial(2, bridge3.host_address, host_listener)
        bridge3.heal(1)
        assert dials_again(bridge3, 0, bridge3.address(1), PORT)
        assert dials_again(bridge3, 1, bridge3.host_address, host_listener)
    finally:
        for listener in listeners:
            bridge3.stop(listener)


def test_delete_removes_what_a_crashed_run_left() -> None:
    require_tools()
    crashed, again = Bridge(3), Bridge(1)  # same pid, so the same names
    crashed.create()
    try:
        again.create()  # must clear the three namespaces and the host veth first
        listed = run(["ip", "netns", "list"]).stdout
        assert crashed.name(2) not in listed
        assert again.name(0) in listed
    finally:
        again.delete()
        crashed.delete()
    assert again.stem not in run(["ip", "netns", "list"]).stdout
    assert run(["ip", "link", "show", again.host_if], check=False).returncode != 0


def test_nodes_talk_behind_a_host_forward_drop() -> None:
    require_tools()
    outer = f"bourse-gang-fw-{os.getpid()}"
    run(["ip", "netns", "del", outer], check=False)
    run(["ip", "netns", "add", outer])
    try:
        if run(["ip", "netns", "exec", outer, "nft", "list", "tables"], check=False).returncode:
            unavailable("nft does not work here: cannot build a FORWARD drop policy")
        done = run(["ip", "netns", "exec", outer, sys.executable, "-c", BEHIND_FORWARD_DROP,
                    str(Path(__file__).parent)], check=False)
    finally:
        run(["ip", "netns", "del", outer], check=False)
    if "No such file" in done.stderr and "bridge-nf-call" in done.stderr:
        pytest.skip("br_netfilter is not loaded here: bridged traffic skips netfilter anyway")
    assert done.returncode == 0, done.stderr
    hook, dial = done.stdout.split("\n")[:2]
    assert hook == "hook 1", "the stand-in host should send bridged frames through netfilter"
    assert dial == "dial True", "the FORWARD drop of the host cut the nodes apart"
