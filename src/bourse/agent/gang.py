"""A gang member's side of the rendezvous, and the environment its process gets.

Rank 0 binds a free port on its address (``host``) and holds it while it prepares; the
coordinator starts the other members with that port once rank 0 has said it. Each of them,
prepared, dials rank 0 there (``join``: retrying while nothing listens yet), says its rank
and waits for ``go``; rank 0, prepared, waits until every member has dialled (``gather``),
stops listening, sends ``go`` and waits for each peer to hang up first — so no socket of its
own lingers in TIME_WAIT on the port its training process binds next. A member that cannot
reach rank 0 fails its start saying which pair and port; rank 0 fails naming the members that
never came. Then every member's process starts with the variables torchrun and Lightning read
(``environment``): the interface for gloo and NCCL is the one that holds the member's own
address, since gloo binds to loopback unless told otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import struct
import time
from dataclasses import dataclass, field

from bourse.agent.hooks import Emit
from bourse.protocol.agent import Gang

GO = b"go\n"
DIAL_EVERY_S = 0.2
SIOCGIFADDR = 0x8915


@dataclass
class Meeting:
    """Rank 0's listener and the members that have dialled it, by rank."""

    gang: Gang
    server: asyncio.Server
    port: int
    peers: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(
        default_factory=dict)
    all_in: asyncio.Event = field(default_factory=asyncio.Event)

    async def _dialled(self, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            rank = int(line.decode().split()[1]) if line.startswith(b"rank ") else -1
        except (TimeoutError, ValueError, IndexError, OSError):
            rank = -1
        if not 0 < rank < len(self.gang.addresses) or rank in self.peers:
            writer.close()
            return
        self.peers[rank] = (reader, writer)
        if len(self.peers) == len(self.gang.addresses) - 1:
            self.all_in.set()

    async def gather(self, timeout_s: float) -> str | None:
        """Wait for every member, then let them go; why not, or None."""
        try:
            await asyncio.wait_for(self.all_in.wait(), timeout_s)
        except TimeoutError:
            missing = [f"rank {r} ({self.gang.addresses[r]})"
                       for r in range(1, len(self.gang.addresses)) if r not in self.peers]
            return (f"rendezvous: {', '.join(missing)} did not reach rank 0 at "
                    f"{self.gang.addresses[0]}:{self.port} within {timeout_s:.0f} s")
        finally:
            self.server.close()
        for _, writer in self.peers.values():
            writer.write(GO)
        for reader, writer in self.peers.values():
            with contextlib.suppress(OSError, TimeoutError):
                await writer.drain()
                await asyncio.wait_for(reader.read(), 5)  # the peer hangs up first
            writer.close()
        return None

    def close(self) -> None:
        self.server.close()
        for _, writer in self.peers.values():
            writer.close()


async def host(gang: Gang, emit: Emit | None = None) -> Meeting | str:
    """Rank 0: listen on a free port of its address and say which (``emit``'s
    ``rendezvous``); the meeting, or why not."""
    address = gang.addresses[0]
    meeting: Meeting | None = None

    async def dialled(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert meeting is not None
        await meeting._dialled(reader, writer)

    try:
        server = await asyncio.start_server(dialled, address, 0, reuse_address=True)
    except OSError as exc:
        return f"rendezvous: cannot listen on {address} (this node's gang address): {exc}"
    port = int(server.sockets[0].getsockname()[1])
    meeting = Meeting(gang, server, port)
    if emit is not None:
        emit("rendezvous", {"address": address, "port": port})
    return meeting


async def join(gang: Gang, timeout_s: float) -> str | None:
    """A member other than rank 0: reach rank 0 and wait for ``go``; why not, or None."""
    target, port = gang.addresses[0], gang.port
    assert port is not None
    deadline = time.monotonic() + timeout_s
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(target, port), max(0.1, deadline - time.monotonic()))
        except (OSError, TimeoutError) as exc:
            error = exc
            await asyncio.sleep(DIAL_EVERY_S)
            continue
        try:
            writer.write(f"rank {gang.rank}\n".encode())
            await writer.drain()
            answer = await asyncio.wait_for(reader.readline(),
                                            max(0.1, deadline - time.monotonic()))
        except (OSError, TimeoutError) as exc:
            error = exc
            answer = b""
        finally:
            writer.close()
        if answer == GO:
            return None
        error = error or ConnectionError("rank 0 closed the connection")
        await asyncio.sleep(DIAL_EVERY_S)
    return (f"rendezvous: rank {gang.rank} ({gang.addresses[gang.rank]}) cannot reach rank 0 "
            f"at {target}:{port}: {_why(error)} (for {timeout_s:g} s)")


def _why(error: Exception | None) -> str:
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno).lower()
    return str(error) if error is not None and str(error) else "timed out"


# what a launcher (torchrun, SLURM, MPI) leaves in the agent's own environment would make a
# member's torchrun or Lightning take another rank or world than its gang's
LEAKS = ("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
         "MASTER_ADDR", "MASTER_PORT", "NODE_RANK")
LEAK_PREFIXES = ("TORCHELASTIC_", "PET_", "SLURM_", "OMPI_", "PMI_", "PMIX_")


def without_leaks(env: dict[str, str]) -> dict[str, str]:
    """The agent's environment less what would confuse a gang member's launcher."""
    return {k: v for k, v in env.items() if k not in LEAKS and not k.startswith(LEAK_PREFIXES)}


def environment(gang: Gang, port: int) -> dict[str, str]:
    """What torchrun, Lightning and plain torch.distributed read, for this member."""
    nodes = len(gang.addresses)
    env = {"MASTER_ADDR": gang.addresses[0], "MASTER_PORT": str(port),
           "NODE_RANK": str(gang.rank), "NNODES": str(nodes),
           "WORLD_SIZE": str(nodes * max(1, gang.gpus_per_node)),
           "NODE_IPS": "\n".join(gang.addresses), "GPUS_PER_NODE": str(gang.gpus_per_node)}
    interface = interface_of(gang.addresses[gang.rank])
    if interface is not None:
        env |= {"GLOO_SOCKET_IFNAME": interface, "NCCL_SOCKET_IFNAME": interface}
    return env


def interface_of(address: str) -> str | None:
    """The network interface that holds ``address`` (IPv4, Linux), or None."""
    packed = _packed(address)
    if packed is None:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)
            except OSError:  # no IPv4 address on it
                continue
            if reply[20:24] == packed:
                return name
    return None


def _packed(address: str) -> bytes | None:
    try:
        return socket.inet_aton(address)
    except OSError:
        return None


def outbound_address(server_url_host: str, port: int) -> str | None:
    """The local address this machine uses to reach the coordinator (no packet is sent):
    what its gang peers dial by default, on a network where they reach it too."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((server_url_host, port))
            found: str = sock.getsockname()[0]
            return found
    except OSError:
        return None
