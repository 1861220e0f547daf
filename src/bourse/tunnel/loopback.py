"""Whether an agent shares the coordinator's loopback: the same kernel boot and the same
network namespace, so the coordinator's ``127.0.0.1:<port>`` is the node's.

Both ends compute ``host_mark()``; the agent sends its own in its hello and the coordinator
compares it with its own (``same_loopback``). The kernel's boot id is 128 random bits drawn at
boot and readable only on that machine, so a node elsewhere cannot claim a match it cannot
read; the namespace's inode tells apart containers with their own network on one kernel
(their boot id is the host's). Where either cannot be read (not Linux), there is no mark and
no match: the gateway then speaks to replicas over the agent's streams, as before.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import os
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
NET_NS = "/proc/self/ns/net"
MARK_PREFIX = "loopback-v1:"


def mark(boot_id: str, net_ns: str) -> str:
    """The mark of a (boot id, network namespace) pair: a digest, so the boot id itself is
    never sent."""
    digest = hashlib.sha256(f"{boot_id.strip()}\n{net_ns.strip()}".encode()).hexdigest()
    return MARK_PREFIX + digest


@functools.cache
def host_mark() -> str | None:
    """This process's mark, or None where the boot id or the namespace cannot be read."""
    try:
        return mark(BOOT_ID.read_text(), os.readlink(NET_NS))
    except OSError:
        return None


def is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def same_loopback(theirs: str | None, ours: str | None, peer: str | None) -> bool:
    """Whether a node that sent ``theirs``, connected from ``peer``, shares our loopback:
    both marks known and equal, and its connection came from a loopback address."""
    return theirs is not None and ours is not None and theirs == ours and is_loopback(peer)
