"""Who listens on a job's port on this node (Linux ``/proc``), so that a job's port reaches
that job and nothing else (issue 20).

A declared port is reached at ``127.0.0.1:<port>`` on the node, and whatever listens there
answers: another job, another service's replica, any process of the machine. So the agent
checks two things:

- before an attempt's command starts, nothing may listen on its declared ports yet
  (:func:`busy`): the start fails as the node's problem and the job is placed elsewhere;
- a stream to a port is opened only when every socket that a connection to
  ``127.0.0.1:<port>`` could reach belongs to the attempt's processes (:func:`foreign`): its
  shim's session or the shim's descendants, matched by the socket's inode
  (``/proc/net/tcp{,6}``) among the processes' descriptors (``/proc/<pid>/fd``).

Parsing is pure (:func:`parse_tcp`, :func:`parse_stat`, :func:`socket_inode`,
:func:`family`) and tested on captured text; the rest reads ``/proc``. :class:`PortGuard`
remembers where the attempt holds the sockets it found to be its own, so the gateway's stream
per request costs a ``readlink``, not a read of ``/proc/net/tcp`` (the kernel formats every
socket of the machine for it: 10-20 ms on this loaded 2-core machine with 460 sockets) nor a
walk of every process.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from bourse.protocol.agent import StartJob

PROC = Path("/proc")
LISTEN = "0A"  # include/net/tcp_states.h: TCP_LISTEN = 10
# where a listener receives connections made to 127.0.0.1 (a dual-stack "::" socket does too)
REACHES_LOOPBACK = frozenset({ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("0.0.0.0"),
                              ipaddress.ip_address("::"),
                              ipaddress.ip_address("::ffff:127.0.0.1"),
                              ipaddress.ip_address("::ffff:0.0.0.0")})
MAX_REMEMBERED = 1024
RECHECK_S = 10.0


@dataclass(frozen=True)
class Listener:
    """A listening TCP socket: its local address and port, and its inode."""

    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int
    inode: int

    @property
    def reaches_loopback(self) -> bool:
        return self.address in REACHES_LOOPBACK


@dataclass(frozen=True)
class Proc:
    """A process as ``/proc/<pid>/stat`` describes it."""

    pid: int
    name: str
    ppid: int
    session: int


def parse_tcp(text: str, *, v6: bool = False,
              byteorder: str = sys.byteorder) -> list[Listener]:
    """The listening sockets of ``/proc/net/tcp`` (``v6``: ``tcp6``). Addresses are printed
    as 32-bit words in the host's byte order; lines that do not parse are skipped."""
    found = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        host, _, port = fields[1].partition(":")
        try:
            found.append(Listener(_address(host, v6, byteorder), int(port, 16),
                                  int(fields[9])))
        except ValueError:
            continue
    return found


def _address(hex_text: str, v6: bool, byteorder: str) -> ipaddress.IPv4Address | \
        ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_text)
    if len(raw) != (16 if v6 else 4):
        raise ValueError(f"bad address {hex_text!r}")
    if byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.IPv6Address(raw) if v6 else ipaddress.IPv4Address(raw)


def parse_stat(pid: int, text: str) -> Proc:
    """``/proc/<pid>/stat``: the name (which may hold spaces and parentheses), the parent and
    the session. ValueError when it does not parse."""
    open_at, close_at = text.find("("), text.rfind(")")
    if open_at < 0 or close_at < open_at:
        raise ValueError(f"bad stat line for pid {pid}")
    rest = text[close_at + 2:].split()  # state, ppid, pgrp, session, ...
    return Proc(pid, text[open_at + 1:close_at], int(rest[1]), int(rest[3]))


def socket_inode(link: str) -> int | None:
    """The inode of a descriptor's link, ``socket:[12345]``; None for anything else."""
    if link.startswith("socket:[") and link.endswith("]"):
        digits = link[8:-1]
        return int(digits) if digits.isdigit() else None
    return None


def family(procs: Iterable[Proc], root: int) -> set[int]:
    """The attempt's processes: ``root`` (its shim, a session leader), the processes of its
    session (a server that daemonized stays in it) and the descendants of any of them."""
    procs = list(procs)
    mine = {root} | {p.pid for p in procs if p.session == root}
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    todo = list(mine)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in mine:
                mine.add(child)
                todo.append(child)
    return mine


def describe(proc: Proc | None) -> str:
    if proc is None:
        return "a process the agent cannot see (another user's, or one that just ended)"
    return f"pid {proc.pid} ({proc.name})"


# --- reading /proc ---------------------------------------------------------------------------

def listeners(ports: Iterable[int], proc: Path = PROC) -> list[Listener]:
    """The sockets listening on ``ports`` that a connection to 127.0.0.1 could reach. (The
    kernel formats every socket of the machine for this read: milliseconds on a busy node.)"""
    wanted = set(ports)
    found = []
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            text = (proc / "net" / name).read_text()
        except OSError:
            continue  # no IPv6 on this kernel
        found += [s for s in parse_tcp(text, v6=v6) if s.port in wanted and s.reaches_loopback]
    return found


def processes(proc: Path = PROC) -> list[Proc]:
    found = []
    for entry in os.scandir(proc):
        if entry.name.isdigit():
            try:
                found.append(parse_stat(int(entry.name), (proc / entry.name / "stat").read_text()))
            except (OSError, ValueError, IndexError):
                continue  # ended meanwhile
    return found


def sockets_of(pid: int, proc: Path = PROC) -> dict[int, str]:
    """The sockets process ``pid`` holds: inode -> descriptor (none when it cannot be
    read)."""
    fd_dir = proc / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return {}
    found = {}
    for name in names:
        try:
            inode = socket_inode(os.readlink(fd_dir / name))
        except OSError:
            continue
        if inode is not None:
            found[inode] = name
    return found


def holds(pid: int, fd: str, inode: int, proc: Path = PROC) -> bool:
    """Whether descriptor ``fd`` of ``pid`` is still socket ``inode`` (inodes are not reused
    while a socket lives, so a reused pid does not pass)."""
    try:
        return os.readlink(proc / str(pid) / "fd" / fd) == f"socket:[{inode}]"
    except OSError:
        return False


def holder(inode: int, procs: Iterable[Proc], proc: Path = PROC) -> Proc | None:
    """The first process found holding socket ``inode``."""
    return next((p for p in procs if inode in sockets_of(p.pid, proc)), None)


def busy(ports: Iterable[int], proc: Path = PROC) -> str | None:
    """Why an attempt declaring ``ports`` cannot start here, or None when nothing listens on
    any of them."""
    found = listeners(ports, proc)
    if not found:
        return None
    port, who = found[0].port, describe(holder(found[0].inode, processes(proc), proc))
    return (f"port {port} is already in use on this node, by {who}: the job declares it, "
            "and its requests would reach that process instead; the job goes to another "
            "node (stop that process, or declare another port)")


Held = tuple[tuple[int, str, int], ...]  # (pid, descriptor, inode) holding each listener


def foreign(port: int, root: int, proc: Path = PROC) -> tuple[str | None, Held]:
    """Whether the sockets listening on ``port`` are all the attempt's (``root``: its shim's
    pid): (why not, or None; where the attempt holds them)."""
    found = listeners([port], proc)
    if not found:
        return None, ()  # nothing listens: the connection says so
    procs = processes(proc)
    held: dict[int, tuple[int, str, int]] = {}
    for pid in family(procs, root):
        held |= {inode: (pid, fd, inode) for inode, fd in sockets_of(pid, proc).items()}
    strange = [s for s in found if s.inode not in held]
    if not strange:
        return None, tuple(held[s.inode] for s in found)
    who = describe(holder(strange[0].inode, procs, proc))
    return (f"port {port} on this node is held by {who}, not by the job: refusing to "
            "connect (the job's server has not bound it, or another process took it; "
            "stop that process, or give the job another port)"), ()


@dataclass(frozen=True)
class _Owned:
    at: float
    held: Held


class PortGuard:
    """:func:`foreign` for streams, remembering where the attempt holds the sockets found
    to be its own: while each is still open (one ``readlink`` apiece), a stream costs no read
    of ``/proc/net/tcp`` nor walk of the processes — no other process can listen on that
    port beside an open listener, short of both setting ``SO_REUSEPORT`` as one user, which
    the full check every ``recheck_s`` catches."""

    def __init__(self, proc: Path = PROC, recheck_s: float = RECHECK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._proc, self._recheck_s, self._clock = proc, recheck_s, clock
        self._owned: dict[tuple[str, int, int], _Owned] = {}

    async def refusal(self, job_id: str, attempt: int, port: int, root: int) -> str | None:
        key, now = (job_id, attempt, port), self._clock()
        known = self._owned.get(key)
        if known is not None and now - known.at < self._recheck_s and \
                all(holds(*h, proc=self._proc) for h in known.held):
            return None
        self._owned.pop(key, None)
        why, held = await asyncio.to_thread(foreign, port, root, self._proc)
        if why is None and held:
            if len(self._owned) >= MAX_REMEMBERED:
                self._owned.clear()
            self._owned[key] = _Owned(now, held)
        return why


def taken_port(msg: StartJob) -> str | None:
    """Why a declared port of the job cannot be its own on this node (something listens
    there already: its requests would reach that), or None. A container's ports are in its
    own network, so nothing on the node takes them."""
    if msg.spec.compute.image is not None:
        return None
    return busy(p.number for p in msg.spec.ports) if msg.spec.ports else None
