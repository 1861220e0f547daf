"""Where ``bourse fleets`` keeps its fleets: ``fleets.json`` in the CLI's config dir
(``$BOURSE_HOME``, else ``~/.config/bourse``), one list per exchange URL.

Client-side, by design (docs/clouds.md, "SSH fleets"): the operator's machine holds the SSH
keys and makes the SSH connections — the coordinator never connects to a node — so the
addresses of the hosts are the operator's to keep. What the exchange needs of a fleet lives on
its nodes there: each node's price (set at enrolment), its provider label (the fleet's name),
its network (``fleet:NAME`` when the hosts reach each other) and whether it is drained. The
file holds no secret: enrolment tokens are never written here. It is written atomically, mode
0600.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bourse.core.errors import InvalidInput
from bourse.sdk.contexts import config_dir

FILE = "fleets.json"
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
VERSION = 1


@dataclass
class FleetHost:
    ssh: str  # user@host[:port], as given
    node_name: str
    node_id: str | None = None  # once its agent enrolled
    added_at: float = 0.0


@dataclass
class Fleet:
    name: str
    exchange: str  # the exchange's URL
    price_per_hour: float  # each host's, the whole machine
    region: str
    reach_each_other: bool = False
    hosts: list[FleetHost] = field(default_factory=list)
    created_at: float = 0.0
    declared_sla: float | None = None  # the availability its hosts declare (--declare-sla)

    @property
    def network(self) -> str | None:
        """The agents' ``--network``: multi-node jobs run on nodes of one network."""
        return f"fleet:{self.name}" if self.reach_each_other else None

    def host(self, ssh: str) -> FleetHost | None:
        return next((h for h in self.hosts if h.ssh == ssh), None)


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise InvalidInput(f"fleet name {name!r}: use 1-32 lowercase letters, digits and '-', "
                           "starting with a letter or digit", field="NAME", hint="e.g. rack-a")
    return name


def path() -> Path:
    return config_dir() / FILE


def load(exchange: str) -> list[Fleet]:
    """The fleets of the exchange at ``exchange`` (none without a file)."""
    return [f for f in _load_all() if f.exchange == exchange]


def save(fleet: Fleet) -> None:
    """Store ``fleet`` (replacing the one of that name and exchange); one with no host left is
    dropped."""
    fleets = [f for f in _load_all() if (f.exchange, f.name) != (fleet.exchange, fleet.name)]
    if fleet.hosts:
        fleets.append(fleet)
    _write(sorted(fleets, key=lambda f: (f.exchange, f.name)))


def _load_all() -> list[Fleet]:
    try:
        data = json.loads(path().read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read {path()}: {exc}", field="fleets",
                           hint="fix or remove the file (it lists the fleets' hosts)") from None
    return [Fleet(**{**f, "hosts": [FleetHost(**h) for h in f.get("hosts", [])]})
            for f in data.get("fleets", [])]


def _write(fleets: list[Fleet]) -> None:
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"version": VERSION, "fleets": [asdict(f) for f in fleets]}, handle,
                  indent=2)
    os.replace(tmp, target)
