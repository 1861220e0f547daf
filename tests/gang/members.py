"""The members of a gang started by hand, one per namespace of a ``Bridge``, with the environment
bourse gives each member (NOTES.md says why each variable is there).

``python members.py lightning|torchrun NODES [-VAR ...] [VAR=VALUE ...]`` runs one gang and
prints every member's output: the way the traps in NOTES.md were found (``-GLOO_SOCKET_IFNAME``
drops a variable, ``VAR=VALUE`` sets or overrides one).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bridge import Bridge

SCRIPTS = Path(__file__).parent / "scripts"
# What a launcher or cluster manager may have left in the environment of the test itself; any of
# them would make torch or Lightning believe they run under torchrun, SLURM, ...
INHERITED = ("RANK", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "NODE_RANK", "WORLD_SIZE", "NNODES")
INHERITED_PREFIXES = ("TORCHELASTIC_", "PET_", "SLURM_", "LSB_", "JSM_", "OMPI_", "PMI_")


def environment(bridge: Bridge, i: int, port: int, gpus_per_node: int = 0) -> dict[str, str]:
    """The variables bourse sets for member ``i`` of a gang on ``bridge``'s nodes."""
    nodes = bridge.count
    return {
        "MASTER_ADDR": bridge.address(0),
        "MASTER_PORT": str(port),
        "NODE_RANK": str(i),
        "NNODES": str(nodes),
        "GPUS_PER_NODE": str(gpus_per_node),
        "WORLD_SIZE": str(nodes * max(gpus_per_node, 1)),
        "NODE_IPS": ",".join(bridge.address(j) for j in range(nodes)),
        "GLOO_SOCKET_IFNAME": bridge.ifname(i),
        "NCCL_SOCKET_IFNAME": bridge.ifname(i),
    }


def clean_environ(extra: Mapping[str, str]) -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items()
            if key not in INHERITED and not key.startswith(INHERITED_PREFIXES)}
    return {**kept, "PYTHONUNBUFFERED": "1", **extra}


def command(kind: str, folder: Path, env: Mapping[str, str]) -> list[str]:
    if kind == "lightning":
        return [sys.executable, str(SCRIPTS / "lightning_ddp.py"), str(folder)]
    if kind == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", "--nnodes", env["NNODES"],
                "--node-rank", env["NODE_RANK"], "--nproc-per-node", "1",
                "--master-addr", env["MASTER_ADDR"], "--master-port", env["MASTER_PORT"],
                str(SCRIPTS / "torchrun_ddp.py"), str(folder)]
    raise ValueError(f"kind must be lightning or torchrun, not {kind!r}")


@dataclass
class Member:
    rank: int
    proc: subprocess.Popen[str]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def changed(env: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """``env`` with each variable of ``changes`` set to its value, or left out where None."""
    merged: dict[str, str | None] = {**env, **changes}
    return {key: value for key, value in merged.items() if value is not None}


def start(bridge: Bridge, kind: str, folder: Path, port: int,
          changes: Mapping[str, str | None] | None = None) -> list[Member]:
    """Every member of one gang, started at once; ``changes`` as in ``changed``."""
    members = []
    for i in range(bridge.count):
        env = changed(environment(bridge, i, port), changes or {})
        log = folder / f"member-{i}.log"
        with log.open("w") as sink:
            proc = subprocess.Popen([*bridge.prefix(i), *command(kind, folder, env)],
                                    env=clean_environ(env), stdout=sink,
                                    stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
        members.append(Member(i, proc, log))
    return members


def wait(members: Sequence[Member], timeout_s: float) -> list[int | None]:
    """Each member's exit status; those still running after ``timeout_s`` are killed (None)."""
    deadline = time.monotonic() + timeout_s
    codes: list[int | None] = []
    for member in members:
        try:
            codes.append(member.proc.wait(max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            member.proc.kill()
            member.proc.wait()
            codes.append(None)
    return codes


def checksums(folder: Path, count: int) -> dict[int, str]:
    """rank -> the rest of the CHECKSUM line each rank wrote ("world=N <sha256>")."""
    found = {}
    for rank in range(count):
        path = folder / f"checksum-{rank}.txt"
        if path.exists():
            found[rank] = path.read_text().strip().split(" ", 2)[2]
    return found


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def parse_changes(args: Sequence[str]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for arg in args:
        if arg.startswith("-"):
            changes[arg[1:]] = None
        else:
            key, _, value = arg.partition("=")
            changes[key] = value
    return changes


def main(kind: str, nodes: str, *args: str) -> None:
    import tempfile

    bridge = Bridge(int(nodes))
    bridge.create()
    try:
        with tempfile.TemporaryDirectory(prefix="bourse-gang-") as scratch:
            began = time.monotonic()
            members = start(bridge, kind, Path(scratch), 29500, parse_changes(args))
            codes = wait(members, float(os.environ.get("GANG_TIMEOUT_S", "120")))
            took = time.monotonic() - began
            for member, code in zip(members, codes, strict=True):
                print(f"===== member {member.rank}: exit {code}\n{member.output()}")
            print(f"===== {took:.1f} s; checksums {checksums(Path(scratch), bridge.count)}")
    finally:
        bridge.delete()


if __name__ == "__main__":
    main(*sys.argv[1:])
