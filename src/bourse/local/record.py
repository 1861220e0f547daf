"""``up.json``: what ``bourse up`` started in a data dir — the coordinator's URL, how many
agents were asked for, and each process by role with its start time. A process is written
here as soon as it is spawned, before anything waits on it, so that ``bourse down`` finds it
whatever happens next."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bourse.local.processes import Process

COORDINATOR = "coordinator"
AGENT_PREFIX = "agent-"


def agent_role(n: int) -> str:
    """The role, and the name of the work dir, of the local agent number ``n``."""
    return f"{AGENT_PREFIX}{n}"


def agent_number(role: str) -> int | None:
    suffix = role.removeprefix(AGENT_PREFIX)
    return int(suffix) if role.startswith(AGENT_PREFIX) and suffix.isdigit() else None


@dataclass
class Record:
    url: str = ""
    agents: int = 0  # how many agents `bourse up` was asked for
    processes: dict[str, Process] = field(default_factory=dict)  # by role

    @property
    def port(self) -> int | None:
        return urlsplit(self.url).port if self.url else None

    @property
    def agent_roles(self) -> list[str]:
        """The agents' roles in order of their number."""
        numbered = {agent_number(role): role for role in self.processes}
        return [numbered[n] for n in sorted(n for n in numbered if n is not None)]

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "agents": self.agents,
                "processes": {role: p.to_json() for role, p in self.processes.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        if "processes" not in data:
            return cls._legacy(data)
        processes = {str(role): Process(int(p["pid"]), _ticks(p.get("started")))
                     for role, p in data["processes"].items()}
        return cls(str(data.get("url", "")), int(data.get("agents", 0)), processes)

    @classmethod
    def _legacy(cls, data: dict[str, Any]) -> Record:
        """A record of an older bourse: pids only (checked by command line)."""
        agents = [int(pid) for pid in data.get("agent_pids", [])]
        processes = {agent_role(n): Process(pid) for n, pid in enumerate(agents)}
        if "server_pid" in data:
            processes[COORDINATOR] = Process(int(data["server_pid"]))
        return cls(str(data.get("url", "")), len(agents), processes)


def _ticks(value: object) -> int | None:
    return value if isinstance(value, int) else None


def load(path: Path) -> Record:
    """The record at ``path``; an empty one when there is none (or it cannot be read: what
    runs is then found from the processes' own files)."""
    try:
        return Record.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return Record()


def save(path: Path, record: Record) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record.to_json()))
    os.replace(tmp, path)
