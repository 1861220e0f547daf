"""An SSH fleet end to end: `bourse fleets add` reaches real OpenSSH servers in network
namespaces (key authentication only, tests/fleets/sshd_host.py), installs nothing (the test's
interpreter is the hosts' ``--agent-python``) but enrols and starts each host's agent over
SSH; a host whose sshd refuses the key and a port where nothing listens are reported failed
with the reason while the others join; a job runs on the fleet at the fleet's price; `bourse
fleets remove` drains a host (its running job finishes) and stops its agent."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sshd_host import Bridge, Host, alive, keygen, require_sshd

from bourse.fleets import ssh
from bourse.fleets.hosts import SshOptions, parse_host
from bourse.protocol.common import JobSpec

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS / "e2e"))
from harness import Cluster, Exchange, free_port, job_pid, wait_for  # noqa: E402
from netns import require_tools  # noqa: E402

pytestmark = pytest.mark.slow
JOIN_TIMEOUT = "150s"  # a cold agent start, its probe and checks, on a busy 2-core machine
PRICE = 1.5


@dataclass
class Fleet:
    exchange: Exchange
    hosts: list[Host]
    ports: list[int]  # each host's sshd that knows the key
    wrong_port: int  # an sshd on hosts[1] that does not know it
    closed_port: int  # nothing listens there, on hosts[0]
    env: dict[str, str]
    args: list[str]  # the ssh options every command takes
    added: subprocess.CompletedProcess[str]
    home: Path
    spare: Host | None = None  # a third host, on the same LAN

    def ssh(self, index: int, port: int | None = None) -> str:
        return f"root@{self.hosts[index].ns_ip}:{port or self.ports[index]}"

    def bourse(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bourse", *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def listing(self) -> list[dict[str, Any]]:
        done = self.bourse("fleets", "--json")
        assert done.returncode == 0, done.stderr
        found: list[dict[str, Any]] = json.loads(done.stdout)
        return found

    def diagnose(self) -> str:
        return "\n".join([self.exchange.cluster.logs(),
                          *(f"--- {h.name} agent ---\n{h.agent_log()[-3000:]}"
                            for h in self.hosts)])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    require_tools()
    require_sshd()
    root = tmp_path_factory.mktemp("fleet")
    cluster = Cluster(root)
    lan = Bridge(3)  # the third host is the default install's (a test of its own)
    cluster.closers.append(lan.delete)
    try:
        lan.create()
        hosts = [Host(root, lan, i) for i in range(3)]
        cluster.closers += [h.stop for h in hosts]  # closers run last first
        key, other = keygen(root / "id_fleet"), keygen(root / "id_other")
        pythonpath = os.environ.get("PYTHONPATH", "")
        ports = [free_port("127.0.0.1"), free_port("127.0.0.1")]
        wrong, closed = ports[1] + 1, ports[0] + 1
        hosts[0].sshd(ports[0], [Path(f"{key}.pub")], pythonpath)
        hosts[1].sshd(ports[1], [Path(f"{key}.pub")], pythonpath)
        hosts[1].sshd(wrong, [Path(f"{other}.pub")], pythonpath)
        known = root / "known_hosts"
        known.write_text(hosts[0].host_key_line(ports[0]) + hosts[1].host_key_line(ports[1])
                         + hosts[1].host_key_line(wrong))
        config = root / "ssh_config"
        config.write_text(f"Host *\n  UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n"
                          "  LogLevel ERROR\n")
        exchange = Exchange(cluster, 1.0, host=lan.host_address).start()
        home = root / "operator"
        env = {**os.environ, "BOURSE_URL": exchange.coordinator.url,
               "BOURSE_TOKEN": exchange.coordinator.token, "BOURSE_HOME": str(home)}
        args = ["--identity", str(key), "--ssh-config", str(config)]
        made = Fleet(exchange, hosts[:2], ports, wrong, closed, env, args,
                     subprocess.CompletedProcess([], 0), home, hosts[2])
        made.added = made.bourse(
            "fleets", "add", "rack", "--ssh", made.ssh(0), "--ssh", made.ssh(1),
            "--ssh", made.ssh(1, wrong), "--ssh", made.ssh(0, closed), *args,
            "--agent-python", sys.executable, "--price-per-hour", str(PRICE),
            "--hosts-reach-each-other", "--declare-sla", "99.5%", "--timeout", JOIN_TIMEOUT,
            "--json")
        yield made
    finally:
        cluster.close()


def _reports(fleet: Fleet) -> dict[str, dict[str, Any]]:
    assert fleet.added.stdout, fleet.added.stderr + fleet.diagnose()
    return {r["host"]: r for r in json.loads(fleet.added.stdout)}


def test_add_reports_each_host_and_the_good_ones_join(fleet: Fleet) -> None:
    reports = _reports(fleet)
    assert fleet.added.returncode == 1  # not every host joined
    for index in (0, 1):
        report = reports[fleet.ssh(index)]
        assert report["ok"], f"{report}\n{fleet.diagnose()}"
        assert report["step"] == "ready" and report["node_id"]
    refused = reports[fleet.ssh(1, fleet.wrong_port)]
    assert (refused["ok"], refused["step"]) == (False, "connect")
    assert "refused the key" in refused["detail"] and "authorized_keys" in refused["hint"]
    closed = reports[fleet.ssh(0, fleet.closed_port)]
    assert (closed["ok"], closed["step"]) == (False, "connect")
    assert "connection refused" in closed["detail"]


def test_the_hosts_are_nodes_verified_at_the_fleets_price(fleet: Fleet) -> None:
    [listed] = fleet.listing()
    assert (listed["name"], listed["price_per_hour"], listed["network"],
            listed["declared_sla"]) == ("rack", PRICE, "fleet:rack", 0.995)
    assert [h["ssh"] for h in listed["hosts"]] == [fleet.ssh(0), fleet.ssh(1)]
    nodes = {n.id: n for n in fleet.exchange.client.nodes()}
    for host in listed["hosts"]:
        node = nodes[host["node_id"]]
        assert host["state"] == "online" and host["verification"] in ("pass", "warn")
        assert node.price == PRICE and node.connected
        assert node.capabilities is not None
        assert (node.capabilities.provider, node.capabilities.network) == ("rack", "fleet:rack")
        assert node.reliability is not None and node.reliability.declared == 0.995
    table = fleet.bourse("fleets")
    assert table.returncode == 0 and "rack" in table.stdout and fleet.ssh(0) in table.stdout


def fleet_processes(fleet: Fleet) -> list[str]:
    """The command lines of the fleet's hosts' processes: their sshd servers and agents, with
    all they started (not this worker's: a module-scoped local exchange of another test may
    still run in it, its agents started with their own one-time ``--token``)."""
    rows = subprocess.run(["ps", "-eww", "-o", "pid=,ppid=,args="], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    table: dict[int, tuple[int, str]] = {}
    for row in rows:
        pid, ppid, *args = row.split(None, 2)
        table[int(pid)] = (int(ppid), " ".join(args))
    roots = {*(server.pid for h in fleet.hosts for server in h.sshds),
             *(h.agent_pid for h in fleet.hosts if h.agent_pid is not None)}
    ours, grew = set(roots), True
    while grew:
        more = {pid for pid, (ppid, _) in table.items() if ppid in ours} - ours
        ours |= more
        grew = bool(more)
    return [table[pid][1] for pid in sorted(ours) if pid in table]


def test_the_token_is_in_no_process_list_no_log_and_not_left_on_the_host(
        fleet: Fleet) -> None:
    # no process of this fleet shows a token: its hosts' sshd servers, what they ran, and the
    # agents, detached from them
    listing = fleet_processes(fleet)
    assert listing and not [line for line in listing if "bse_e_" in line], listing
    # this fleet's agents, by pid: another worker may run a fleet named rack beside it
    ours = [Path(f"/proc/{host.agent_pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            for host in fleet.hosts]
    assert all("--name rack-" in line and "--token-file" in line for line in ours), ours
    for host in fleet.hosts:
        pid = host.agent_pid
        assert pid is not None
        assert b"bse_e_" not in Path(f"/proc/{pid}/environ").read_bytes()
    for host in fleet.hosts:
        assert not (host.home / ".bourse" / "enrol-token").exists()  # spent, then removed
        assert "bse_e_" not in host.agent_log()
    assert "bse_e_" not in fleet.added.stdout + fleet.added.stderr
    stored = (fleet.home / "fleets.json").read_text()
    assert "bse_" not in stored and oct((fleet.home / "fleets.json").stat().st_mode)[-3:] == \
        "600"


def test_an_agent_started_again_without_its_token_is_the_same_node(fleet: Fleet) -> None:
    """The token is gone from the host once spent; the launcher a reboot (or systemd's
    restart) runs starts the agent without it, and it comes back as its node."""
    client = fleet.exchange.client
    host, listed = fleet.hosts[0], fleet.listing()[0]["hosts"][0]
    before = len(client.nodes())
    pid = host.agent_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not client.node(listed["node_id"]).connected, 30, "the node to go")
    options = SshOptions(identity=Path(fleet.args[1]), config=Path(fleet.args[3]))
    again = ssh.run(parse_host(fleet.ssh(0)), options,
                    'setsid nohup sh "$HOME/.bourse/agent.sh" >>"$HOME/.bourse/agent.log" '
                    '2>&1 </dev/null & echo $! > "$HOME/.bourse/agent.pid"')
    assert again.returncode == 0, again.stderr
    wait_for(lambda: client.node(listed["node_id"]).connected, 60, "the node to be back",
             fleet.diagnose)
    assert len(client.nodes()) == before  # the same node, not a new one
    assert "--token-file" not in Path(f"/proc/{host.agent_pid}/cmdline").read_text()


def test_a_job_runs_on_the_fleet_at_its_price(fleet: Fleet) -> None:
    client = fleet.exchange.client
    job = client.submit(JobSpec(command=["sh", "-c", "echo hello from the fleet"],
                                compute={"cpus": 1}, max_retries=0))
    done = fleet.exchange.wait_ended(job.id, timeout=120)
    assert done.state == "SUCCEEDED", done.reason
    ids = {h["node_id"] for h in fleet.listing()[0]["hosts"]}
    attempt = done.attempts[0]
    assert attempt.node_id in ids
    node = client.node(attempt.node_id or "")
    assert node.capabilities is not None
    assert attempt.price_per_hour == pytest.approx(PRICE / node.capabilities.cpus)


def test_a_two_node_job_spans_the_hosts_that_reach_each_other(fleet: Fleet) -> None:
    """--hosts-reach-each-other: the agents share the network fleet:rack (one LAN here), so a
    gang of two is placed on the two hosts and runs with rank 0's address as its master."""
    client = fleet.exchange.client
    job = client.submit(JobSpec.model_validate({
        "command": ["sh", "-c", "echo rank=$NODE_RANK master=$MASTER_ADDR"],
        "compute": {"num_nodes": 2, "cpus": 1}, "max_retries": 0}))
    done = fleet.exchange.wait_ended(job.id, timeout=120)
    assert done.state == "SUCCEEDED", f"{done.reason}\n{fleet.diagnose()}"
    ids = {h["node_id"] for h in fleet.listing()[0]["hosts"]}
    assert {a.node_id for a in done.attempts} == ids
    stored = b"".join(base64.b64decode(c.data) for c in client.iter_logs(job.id)).decode()
    masters = {line.split("master=")[1] for line in stored.splitlines() if "master=" in line}
    assert sorted(line.split()[0] for line in stored.splitlines()) == ["rank=0", "rank=1"]
    assert len(masters) == 1 and masters <= {h.ns_ip for h in fleet.hosts}


def test_remove_drains_a_host_then_waits_for_the_last_ones_work_and_forces_it(
        fleet: Fleet) -> None:
    """Removing a host drains it: the job running there finishes, then its agent stops; the
    other host, removed while a job outlives --wait, is kept (drained, reported) until
    --force stops its agent and kills the job's processes. One test: the second removal
    needs the first's (tests of this module are spread over xdist's workers, each with a
    fleet of its own, so no test may lean on another having run before it)."""
    client = fleet.exchange.client
    job = client.submit(JobSpec(command=["sh", "-c", "sleep 4; echo finished"],
                                compute={"cpus": 1}, max_retries=0))
    running = fleet.exchange.wait_running(job.id, timeout=120)
    index = next(i for i, h in enumerate(fleet.listing()[0]["hosts"])
                 if h["node_id"] == running.node_id)
    host = fleet.hosts[index]
    pid = host.agent_pid
    assert pid is not None and alive(pid)
    removed = fleet.bourse("fleets", "remove", "rack", "--host", fleet.ssh(index), *fleet.args,
                           "-y", "--wait", "90s", "--json")
    assert removed.returncode == 0, removed.stdout + removed.stderr + fleet.diagnose()
    [report] = json.loads(removed.stdout)
    assert (report["ok"], report["step"]) == (True, "removed")
    assert client.job(job.id).state == "SUCCEEDED"  # it finished before the agent stopped
    wait_for(lambda: not alive(pid), 15, "the agent to stop")
    node = client.node(running.node_id or "")
    assert node.drained_at is not None
    [left] = fleet.listing()
    assert [h["ssh"] for h in left["hosts"]] == [fleet.ssh(1 - index)]
    again = client.submit(JobSpec(command=["true"], compute={"cpus": 1}, max_retries=0))
    assert fleet.exchange.wait_ended(again.id, timeout=60).node_id != node.id
    # the last host, removed while its job outlives --wait, then with --force
    [last] = fleet.listing()[0]["hosts"]
    other = next(i for i in (0, 1) if fleet.ssh(i) == last["ssh"])
    long_job = client.submit(JobSpec(command=["sleep", "300"], compute={"cpus": 1},
                                     max_retries=0))
    long_running = fleet.exchange.wait_running(long_job.id, timeout=120)
    assert long_running.node_id == last["node_id"]
    kept = fleet.bourse("fleets", "rm", "rack", *fleet.args, "--wait", "2s", "--yes", "--json")
    assert kept.returncode == 1, kept.stdout + kept.stderr
    [kept_report] = json.loads(kept.stdout)
    assert (kept_report["ok"], kept_report["step"]) == (False, "drain")
    assert "1 attempt(s) still run" in kept_report["detail"] and "--force" in kept_report["hint"]
    assert [h["ssh"] for h in fleet.listing()[0]["hosts"]] == [last["ssh"]]
    assert client.node(last["node_id"]).drained_at is not None
    last_host = fleet.hosts[other]
    last_pid = last_host.agent_pid
    assert last_pid is not None and alive(last_pid)
    attempt = last_host.work / "jobs" / long_job.id / "1"
    shim = wait_for(lambda: job_pid(attempt), 15, "the job's shim")
    forced = fleet.bourse("fleets", "remove", "rack", *fleet.args, "--wait", "1s", "--force",
                          "-y", "--json")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    wait_for(lambda: not alive(last_pid) and not alive(shim) and job_pid(attempt) is None, 15,
             "the agent and the job to be stopped",
             lambda: f"agent {alive(last_pid)} shim {alive(shim)} {forced.stdout}")
    assert fleet.listing() == []  # no host left: the fleet is gone
    client.cancel(long_job.id)


@pytest.mark.parametrize(("args", "says"), [
    (["--ssh", "10.0.0.5"], "has no user"),
    (["--ssh", "root@10.0.0.5:0"], "is not a port"),
    (["--ssh", "root@10.0.0.5:ssh"], "is not a port"),
    (["--ssh", "root@10.0.0.5", "--identity", "/nonexistent/key"], "no such file"),
    (["--ssh", "root@10.0.0.5"], "needs --price-per-hour"),
    (["--ssh", "root@fd00::5"], "IPv6 address in brackets"),
    (["--ssh", "root@10.0.0.5", "--price-per-hour", "0"], "above 0"),
    (["--ssh", "root@10.0.0.5", "--price-per-hour", "1", "--declare-sla", "101%"], "101%"),
])
def test_bad_input_gets_a_clear_error(tmp_path: Path, args: list[str], says: str) -> None:
    env = {**os.environ, "BOURSE_URL": "http://127.0.0.1:9", "BOURSE_TOKEN": "bse_u_x",
           "BOURSE_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "bourse", "fleets", "add", "new", *args],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr


def test_the_default_install_copies_the_wheel_and_says_why_pip_failed(
        fleet: Fleet, tmp_path: Path) -> None:
    """Without --agent-python the wheel of this checkout is built, copied through ssh, and
    installed with its agent extra in a virtualenv (the host's BOURSE_AGENT_VENV). The hosts
    here reach no package index (PIP_NO_INDEX in the host's environment), so pip fails: the
    report says so and where its log is, and nothing joins."""
    host = fleet.spare
    assert host is not None
    port = free_port("127.0.0.1")
    host.sshd(port, [Path(fleet.args[1] + ".pub")], os.environ.get("PYTHONPATH", ""),
              env={"PIP_NO_INDEX": "1"})
    known = tmp_path / "known_hosts"
    known.write_text(host.host_key_line(port))
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n  UserKnownHostsFile {known}\n  LogLevel ERROR\n")
    target = f"root@{host.ns_ip}:{port}"
    done = fleet.bourse("fleets", "add", "lab", "--ssh", target, "--identity", fleet.args[1],
                        "--ssh-config", str(config), "--price-per-hour", "2", "--json")
    assert done.returncode == 1, done.stderr
    [report] = json.loads(done.stdout)
    assert (report["ok"], report["step"]) == (False, "install"), report
    assert "pip install of bourse[agent] failed" in report["detail"]
    assert "install.log" in report["hint"]
    base = host.home / ".bourse"
    assert (base / "wheels" / "bourse-0.1.0-py3-none-any.whl").is_file()
    assert (host.dir / "agent-venv" / "bin" / "python").exists()  # BOURSE_AGENT_VENV
    assert "bourse" in (base / "install.log").read_text()
    assert not (base / "enrol-token").exists()  # the script stopped before the token
    assert "lab" not in [f["name"] for f in fleet.listing()]  # no host joined it
