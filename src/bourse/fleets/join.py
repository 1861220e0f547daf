"""One host of an SSH fleet joining or leaving: the steps ``bourse fleets add`` and ``bourse
fleets remove`` take for it, each reported (ok, or the step that failed, why, and a hint).

Joining: with an enrolment token priced at the fleet's price, ``copy`` the wheel (unless
``--agent-python``), run the install script over ssh (``prepare``, ``install``, ``token``,
``start``: ``bourse.fleets.script``), then the exchange is watched until the host's node has
enrolled (``enrol``) and passed verification (``verify``), and the spent token's file is
removed from the host. Leaving: the node is drained (``drain``: no new work; what runs there
finishes, or with ``force`` is stopped and retried elsewhere), then the agent is stopped
over ssh (``stop``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bourse.fleets import ssh as fleet_ssh
from bourse.fleets.hosts import SshHost, SshOptions
from bourse.fleets.script import AGENT_LOG, FORGET_TOKEN, HostAgent, install_script, outcome
from bourse.fleets.script import stop_script as stop_agent_script
from bourse.protocol.api import EnrollmentToken, NodeView
from bourse.sdk.client import Client
from bourse.sdk.errors import ApiNotFound

VERIFIED = ("pass", "warn")
POLL_S = 1.0
TOKEN_LIFE_S = 3600.0


@dataclass
class Report:
    """What happened to one host."""

    host: str
    ok: bool
    step: str  # the last step reached: the one that failed, or "ready" / "removed"
    detail: str = ""
    hint: str | None = None
    node_id: str | None = None
    node_name: str | None = None


@dataclass(frozen=True)
class Join:
    """What every host of one ``bourse fleets add`` joins with."""

    fleet: str
    region: str
    network: str | None
    ssh: SshOptions
    timeout_s: float
    version: str  # the coordinator's: what the agents run
    wheel: Path | None = None  # copied to the host, unless agent_python
    agent_python: str | None = None
    declared_sla: float | None = None  # the availability the fleet declares


def node_name(fleet: str, host: SshHost) -> str:
    suffix = "" if host.port == 22 else f"-p{host.port}"
    return f"{fleet}-{host.node_name}"[:64 - len(suffix)] + suffix


def join(client: Client, join: Join, host: SshHost, token: EnrollmentToken,
         clock: Callable[[], float] = time.time) -> Report:
    """``token``: the host's one-time enrolment token (priced at the fleet's price), made
    with a life of ``TOKEN_LIFE_S``."""
    name = node_name(join.fleet, host)
    report = Report(host=host.label, ok=False, step="enrol", node_name=name)
    if join.agent_python is None and join.wheel is not None:
        copied = _copy_wheel(host, join.ssh, join.wheel)
        if copied is not None:
            return _failed(report, "copy", *copied)
    # the coordinator's clock when it made the token: the host's node is made after it (the
    # node's created_at is the coordinator's time, and this machine's clock may be off)
    made_at = token.expires_at - TOKEN_LIFE_S - 1.0
    script = install_script(HostAgent(
        server_url=client.url, token=token.token, node_name=name,
        version=join.version, fleet=join.fleet, region=join.region,
        network=join.network, agent_python=join.agent_python,
        wheel=None if join.wheel is None else join.wheel.name,
        declared_sla=join.declared_sla))
    ran = fleet_ssh.run_script(host, join.ssh, script)
    if ran.unreachable:
        return _failed(report, "connect", *ran.why())
    result = outcome(ran.returncode, ran.stdout)
    if not result.ok:
        return _failed(report, result.step, result.detail, _hint(result.step))
    return _watch(client, join, host, report, since=made_at, clock=clock)


def _copy_wheel(host: SshHost, ssh: SshOptions, wheel: Path) -> tuple[str, str] | None:
    copied = fleet_ssh.copy(host, ssh, wheel, ".bourse/wheels")
    if copied.returncode != 0:
        return copied.why() if copied.unreachable else (
            f"copying {wheel.name} to ~/.bourse/wheels failed: {copied.stderr.strip()[-300:]}",
            "check the user's home and its free space on the host")
    return None


def _watch(client: Client, join: Join, host: SshHost, report: Report, *, since: float,
           clock: Callable[[], float]) -> Report:
    """The host's node, from its enrolment to its verification (or the time limit)."""
    deadline = clock() + join.timeout_s
    node: NodeView | None = None
    while clock() < deadline:
        node = _node(client, report.node_name or "", since)
        if node is not None:
            report.node_id, report.step = node.id, "verify"
            if node.verification_status == "fail":
                return _failed(report, "verify", _verdict(node),
                               "`bourse nodes show " + node.id + "` has the report")
            if node.connected and node.verification_status in VERIFIED:
                fleet_ssh.run(host, join.ssh, FORGET_TOKEN)  # spent; worth nothing now
                report.ok, report.step = True, "ready"
                report.detail = f"node {node.id} verified ({node.verification_status})"
                return report
        time.sleep(POLL_S)
    log = fleet_ssh.run(host, join.ssh, AGENT_LOG).stdout.strip().splitlines()[-3:]
    waited = "enrolled" if node is None else "was verified"
    return _failed(report, report.step, f"the agent never {waited} within "
                   f"{join.timeout_s:g} s; its log ends: " + " | ".join(log),
                   "check that the host reaches the coordinator at " + client.url)


def _node(client: Client, name: str, since: float) -> NodeView | None:
    found = [n for n in client.nodes() if n.name == name and n.created_at >= since]
    return found[-1] if found else None


def _verdict(node: NodeView) -> str:
    if node.verification is None:
        return "verification failed"
    failed = [c.name for c in node.verification.checks if c.status == "fail"]
    return "verification failed: " + (", ".join(failed) or "see the report")


def _hint(step: str) -> str:
    return {
        "prepare": "check the user's home directory on the host",
        "install": "see ~/.bourse/install.log on the host; --agent-python names an "
                   "interpreter that has bourse[agent] already",
        "token": "check the user's home directory on the host",
        "start": "see ~/.bourse/agent.log on the host",
    }.get(step, "run the same ssh by hand to see why")


def _failed(report: Report, step: str, detail: str, hint: str | None) -> Report:
    report.ok, report.step, report.detail, report.hint = False, step, detail, hint
    return report


@dataclass(frozen=True)
class Leave:
    ssh: SshOptions
    wait_s: float  # how long running work may take to finish
    force: bool = False  # past wait_s: stop it anyway (its jobs are retried elsewhere)


def leave(client: Client, leave: Leave, host: SshHost, node_id: str | None,
          clock: Callable[[], float] = time.time) -> Report:
    report = Report(host=host.label, ok=False, step="drain", node_id=node_id)
    if node_id is not None:
        still = _drain(client, node_id, clock() + leave.wait_s, clock)
        if still and not leave.force:
            return _failed(report, "drain", f"{still} attempt(s) still run on node {node_id} "
                           f"after {leave.wait_s:g} s; it takes no new work",
                           "wait longer (--wait), stop them (`bourse stop`), or --force: "
                           "they are stopped and retried elsewhere")
    report.step = "stop"
    ran = fleet_ssh.run_script(host, leave.ssh, stop_agent_script(), timeout=120.0)
    if ran.unreachable:
        return _failed(report, "stop", *ran.why())
    if "bourse-stopped" not in ran.stdout:
        return _failed(report, "stop", f"the stop script failed (exit status "
                       f"{ran.returncode}): {ran.stderr.strip()[-300:]}",
                       "stop the agent by hand: ~/.bourse/agent.pid, or bourse-agent.service")
    report.ok, report.step, report.detail = True, "removed", "drained, agent stopped"
    return report


def _drain(client: Client, node_id: str, deadline: float,
           clock: Callable[[], float]) -> int:
    """Drain the node; the attempts still running there at ``deadline`` (0: none; a node the
    exchange no longer has runs nothing)."""
    while True:
        try:
            running = client.drain(node_id).running
        except ApiNotFound:
            return 0
        if running == 0 or clock() >= deadline:
            return running
        time.sleep(POLL_S)
