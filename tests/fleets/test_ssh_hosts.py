"""The pure parts of SSH fleets: host parsing, the ssh command line, what a failed ssh said,
the host scripts (valid sh, the token only in the heredoc) and what their output means."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from bourse.cli.fleets import Terms
from bourse.cli.fleets import joining_fleet as existing_or_new
from bourse.core.errors import InvalidInput
from bourse.fleets.hosts import SshHost, SshOptions, explain, parse_host, ssh_argv
from bourse.fleets.join import node_name
from bourse.fleets.script import HostAgent, install_script, outcome, stop_script
from bourse.fleets.store import Fleet, FleetHost, check_name, load, save
from bourse.fleets.wheel import find_wheel, wheel_version

TOKEN = "bse_e_" + "x" * 43


@pytest.mark.parametrize(("text", "host"), [
    ("ubuntu@10.0.0.5", SshHost("ubuntu", "10.0.0.5", 22)),
    ("root@gpu-01.example.com:2222", SshHost("root", "gpu-01.example.com", 2222)),
    ("ops@[fd00::5]:22", SshHost("ops", "fd00::5", 22)),
    ("ops@[fd00::5]", SshHost("ops", "fd00::5", 22)),
    ("a@b@host", None),
])
def test_hosts_parse(text: str, host: SshHost | None) -> None:
    if host is None:
        with pytest.raises(InvalidInput):
            parse_host(text)
        return
    assert parse_host(text) == host
    assert parse_host(host.label) == host


@pytest.mark.parametrize(("text", "says"), [
    ("10.0.0.5", "has no user"), ("@10.0.0.5", "not a user name"),
    ("u@host:0", "not a port"), ("u@host:65536", "not a port"), ("u@host:", "not a port"),
    ("u@fd00::5", "in brackets"), ("u@[fd00::5", "in brackets"), ("u@-bad", "not a host"),
    ("u@host;rm", "not a host"), ("u@", "not a host"),
])
def test_bad_hosts_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says) as raised:
        parse_host(text)
    assert raised.value.hint


def test_ssh_is_key_only_never_prompts_and_checks_host_keys(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("k")
    argv = ssh_argv(SshHost("u", "h", 2222), SshOptions(identity=key), "sh -s")
    joined = " ".join(argv)
    for option in ("BatchMode=yes", "PasswordAuthentication=no",
                   "KbdInteractiveAuthentication=no", "PreferredAuthentications=publickey",
                   "IdentitiesOnly=yes"):
        assert option in joined
    assert "StrictHostKeyChecking" not in joined  # known_hosts decides, unless asked
    assert argv[-3:] == ["--", "h", "sh -s"]
    assert "accept-new" in " ".join(ssh_argv(SshHost("u", "h"), SshOptions(accept_new=True),
                                             "true"))


def test_missing_identity_and_config_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"--identity .*no such file"):
        SshOptions(identity=tmp_path / "nope").check()
    with pytest.raises(InvalidInput, match="--ssh-config"):
        SshOptions(config=tmp_path / "nope").check()


@pytest.mark.parametrize(("stderr", "reason"), [
    ("root@h: Permission denied (publickey).", "refused the key"),
    ("Host key verification failed.", "not in known_hosts"),
    ("ssh: connect to host h port 22: Connection refused", "connection refused"),
    ("ssh: connect to host h port 22: Connection timed out", "timed out"),
    ("ssh: Could not resolve hostname h: Name or service not known", "does not resolve"),
    ("kex_exchange_identification: odd\n", "ssh failed: kex_exchange_identification: odd"),
])
def test_ssh_failures_become_a_reason_and_a_hint(stderr: str, reason: str) -> None:
    found, hint = explain(stderr)
    assert reason in found and hint


def _agent(**change: object) -> HostAgent:
    values: dict[str, object] = {
        "server_url": "http://10.0.0.1:8470", "token": TOKEN, "node_name": "rack-h1",
        "version": "0.1.0", "fleet": "rack", "region": "on-prem", "network": "fleet:rack",
        "wheel": "bourse-0.1.0-py3-none-any.whl"}
    return HostAgent(**{**values, **change})  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
@pytest.mark.parametrize("agent", [_agent(), _agent(agent_python="/opt/py/bin/python",
                                                    wheel=None, network=None)])
def test_the_scripts_are_valid_sh_and_the_token_is_only_in_its_heredoc(
        agent: HostAgent) -> None:
    script = install_script(agent)
    for text in (script, stop_script()):
        assert subprocess.run(["sh", "-n"], input=text, text=True, check=False).returncode == 0
    lines = [line for line in script.splitlines() if TOKEN in line]
    assert lines == [TOKEN]  # its own line, between the heredoc's markers
    assert "--token-file" in script and "--token " not in script
    assert ("--network fleet:rack" in script) is (agent.network is not None)
    assert "--declare-sla" not in script


def test_a_fleet_that_declares_an_sla_starts_its_agents_declaring_it() -> None:
    assert "--declare-sla 0.995" in install_script(_agent(declared_sla=0.995))


@pytest.mark.parametrize("change", [
    {"token": "two\nlines"}, {"server_url": "ftp://x"}, {"node_name": "a b"},
    {"version": "latest"}, {"wheel": "other-1.0-py3-none-any.whl"},
    {"agent_python": "/x'; rm -rf /"}, {"network": "a b"}, {"declared_sla": 0.0},
    {"declared_sla": 1.5}, {"declared_sla": float("nan")},
])
def test_bad_script_values_are_refused(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        install_script(_agent(**change))


@pytest.mark.parametrize(("code", "out", "ok", "step", "detail"), [
    (0, "bourse-step prepare\nbourse-step start\nbourse-started process 42\n", True, "start",
     "process 42"),
    (3, "bourse-step prepare\nbourse-step install\nbourse-failed install: no python3\n",
     False, "install", "no python3"),
    (1, "bourse-step prepare\nbourse-step token\n", False, "token", "exit status 1"),
    (0, "", False, "prepare", "exit status 0"),
])
def test_a_scripts_output_says_where_it_stopped(code: int, out: str, ok: bool, step: str,
                                                detail: str) -> None:
    found = outcome(code, out)
    assert (found.ok, found.step) == (ok, step) and detail in found.detail


def test_node_names_are_labels_and_keep_ports_apart() -> None:
    assert node_name("rack", SshHost("u", "10.0.0.5")) == "rack-10.0.0.5"
    assert node_name("rack", SshHost("u", "fd00::5", 2222)) == "rack-fd00--5-p2222"
    assert len(node_name("rack", SshHost("u", "a" * 63 + ".example.com", 2222))) == 64


def test_the_store_round_trips_per_exchange(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path))
    fleet = Fleet(name="rack", exchange="http://a", price_per_hour=1.5, region="on-prem",
                  reach_each_other=True, hosts=[FleetHost("u@h", "rack-h", "n-1", 1.0)])
    save(fleet)
    assert load("http://a") == [fleet] and load("http://b") == []
    assert fleet.network == "fleet:rack"
    assert oct((tmp_path / "fleets.json").stat().st_mode)[-3:] == "600"
    fleet.hosts.clear()
    save(fleet)  # a fleet with no host left is gone
    assert load("http://a") == []
    with pytest.raises(InvalidInput, match="fleet name"):
        check_name("Rack A")


def _wheel(path: Path, name: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return path


def test_a_given_wheel_must_be_bournes_at_the_coordinators_version(tmp_path: Path) -> None:
    good = _wheel(tmp_path / "bourse-0.1.0-py3-none-any.whl", "bourse", "0.1.0")
    assert wheel_version(good) == "0.1.0"
    assert find_wheel("0.1.0", good) == good
    with pytest.raises(InvalidInput, match=r"is bourse 0\.1\.0; the coordinator runs 0\.2\.0"):
        find_wheel("0.2.0", good)
    with pytest.raises(InvalidInput, match="not bourse"):
        find_wheel("1.0", _wheel(tmp_path / "other-1.0-py3-none-any.whl", "other", "1.0"))
    with pytest.raises(InvalidInput, match="no such file"):
        find_wheel("0.1.0", tmp_path / "missing.whl")
    (tmp_path / "junk.whl").write_text("not a zip")
    with pytest.raises(InvalidInput, match="not a wheel"):
        find_wheel("0.1.0", tmp_path / "junk.whl")


def test_hosts_join_an_existing_fleet_at_its_price_and_only_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path))
    url, host = "http://a", SshHost("u", "h1")
    with pytest.raises(InvalidInput, match="needs --price-per-hour"):
        existing_or_new(url, "rack", Terms(None, "on-prem", False), [host])
    fleet = existing_or_new(url, "rack", Terms(1.5, "on-prem", True, 0.995), [host])
    fleet.hosts.append(FleetHost(host.label, "rack-h1", "n-1"))
    save(fleet)
    again = existing_or_new(url, "rack", Terms(None, "elsewhere", False), [SshHost("u", "h2")])
    assert (again.price_per_hour, again.region, again.reach_each_other, again.declared_sla) == (
        1.5, "on-prem", True, 0.995)  # the fleet's, whatever this command said
    with pytest.raises(InvalidInput, match=r"priced at \$1\.50/h"):
        existing_or_new(url, "rack", Terms(2.0, "on-prem", False), [SshHost("u", "h2")])
    with pytest.raises(InvalidInput, match=r"declares 99\.50%") as refused:
        existing_or_new(url, "rack", Terms(None, "on-prem", False, 0.9), [SshHost("u", "h2")])
    assert refused.value.field == "--declare-sla"
    with pytest.raises(InvalidInput, match="is in fleet rack already"):
        existing_or_new(url, "other", Terms(1.0, "on-prem", False), [host])
    assert existing_or_new("http://b", "other", Terms(1.0, "on-prem", False), [host]).hosts == []
