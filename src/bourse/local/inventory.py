"""What runs for a local exchange's data dir: the recorded processes (``up.json``) that are
still the same processes, and those the record missed — a coordinator found by its
``server/server.json``, an agent by the lock it holds on its work dir (``agent.lock``), a store
left running by a killed coordinator. Nothing is counted as ours unless it provably is: the
same pid and start time, or a command line naming this data dir."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from bourse.agent.lock import AgentRunning, holder
from bourse.core.errors import BourseError
from bourse.local.processes import Process, command_line, identify, running
from bourse.local.record import COORDINATOR, Record, agent_number, load
from bourse.storage.seaweed import running_weed

STORE = "store"


class LocalExchangeError(BourseError):
    exit_code = 1


@dataclass
class Inventory:
    """The record as written, and what of it (and beyond it) runs now."""

    recorded: Record
    live: Record
    store: Process | None = None  # an orphaned embedded store (its coordinator is gone)
    gone: list[str] = field(default_factory=list)  # recorded roles that no longer run

    def describe(self, role: str) -> str:
        process = self.recorded.processes.get(role) or self.live.processes[role]
        return f"{role} (pid {process.pid})"


def marker(data_dir: Path, role: str) -> str:
    """An argument only this data dir's process for ``role`` has: the coordinator's
    ``--data-dir``, an agent's ``--work-dir``."""
    return str(data_dir / ("server" if role == COORDINATOR else role))


def take(data_dir: Path, state_file: Path) -> Inventory:
    recorded = load(state_file)
    live = Record(recorded.url, recorded.agents)
    for role, process in recorded.processes.items():
        if running(process, marker(data_dir, role)):
            live.processes[role] = process
    _find_coordinator(data_dir, live)
    _find_agents(data_dir, live)
    gone = [role for role in recorded.processes if role not in live.processes]
    return Inventory(recorded, live, _orphan_store(data_dir, live), gone)


def _find_coordinator(data_dir: Path, live: Record) -> None:
    """A coordinator the record misses, by the state file it writes when it starts."""
    if COORDINATOR in live.processes:
        return
    try:
        state = json.loads((data_dir / "server" / "server.json").read_text())
        pid, url = int(state["pid"]), str(state["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    process = identify(pid)
    if process is not None and marker(data_dir, COORDINATOR) in command_line(pid):
        live.processes[COORDINATOR] = process
        live.url = url


def _find_agents(data_dir: Path, live: Record) -> None:
    """Agents the record misses, by the lock each holds on its work dir."""
    for work_dir in sorted(data_dir.glob("agent-*")):
        if agent_number(work_dir.name) is None or work_dir.name in live.processes:
            continue
        try:
            pid = holder(work_dir)
        except AgentRunning as exc:
            raise LocalExchangeError(exc.message, hint="stop it, then try again") from None
        process = identify(pid) if pid is not None else None
        if process is not None:
            live.processes[work_dir.name] = process
            live.agents = max(live.agents, len(live.agent_roles))


def _orphan_store(data_dir: Path, live: Record) -> Process | None:
    """The embedded store of a coordinator that is gone (it runs in a session of its own, so
    it outlives a coordinator killed with SIGKILL)."""
    if COORDINATOR in live.processes:
        return None  # the coordinator stops (or adopts) its own
    pid = running_weed(data_dir / "server" / "seaweed")
    return identify(pid) if pid is not None else None
