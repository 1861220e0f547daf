"""-y/--yes and the question before a destructive command; `bourse stop --all/--state`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_exchange import TOKEN, URL, FakeExchange, job_view
from click.testing import CliRunner, Result

from bourse.cli import confirm
from bourse.cli.main import cli
from bourse.sdk.client import Client


def run(*args: str, answer: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=answer)


def cancelled(exchange: FakeExchange) -> list[str]:
    return [r.url.path.split("/")[-2] for r in exchange.requests
            if r.method == "POST" and r.url.path.endswith("/cancel")]


def seed(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "SUCCEEDED"))
    exchange.add_job(job_view("j2", "RUNNING"))
    exchange.add_job(job_view("j3", "PENDING"))
    exchange.add_job(job_view("j4", "RUNNING", cancel_requested=True))


@pytest.fixture
def at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confirm, "terminal", lambda: True)


@pytest.mark.parametrize("args", [
    ("stop", "j2", "j3"), ("stop", "--all"), ("stop", "--state", "running"),
    ("tokens", "revoke", "tok-1"), ("secrets", "rm", "HF_TOKEN"), ("nodes", "reclaim", "n1"),
    ("runs", "stop", "r1"),
])
def test_without_a_terminal_it_refuses_and_does_nothing(exchange: FakeExchange,
                                                        args: tuple[str, ...]) -> None:
    seed(exchange)
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "--yes: " in result.stderr and "pass --yes (or -y)" in result.stderr
    assert [r.method for r in exchange.requests if r.method != "GET"] == []


def test_yes_stops_several_jobs(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("stop", "-y", "j2", "j3")
    assert result.exit_code == 0, result.output
    assert result.stdout == "j2: stopping\nj3: stopping\n"
    assert cancelled(exchange) == ["j2", "j3"]


def test_one_named_job_needs_no_confirmation(exchange: FakeExchange) -> None:
    seed(exchange)
    assert run("stop", "j2").exit_code == 0
    assert cancelled(exchange) == ["j2"]


def test_all_stops_the_unfinished_jobs_not_already_stopping(exchange: FakeExchange) -> None:
    seed(exchange)
    result = run("stop", "--all", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert cancelled(exchange) == ["j2", "j3"]  # oldest first; j4 was already told
    assert [v["id"] for v in json.loads(result.stdout)] == ["j2", "j3"]


def test_state_chooses_by_state(exchange: FakeExchange) -> None:
    seed(exchange)
    assert run("stop", "--state", "pending", "-y").exit_code == 0
    assert cancelled(exchange) == ["j3"]
    assert exchange.requests[0].url.params["state"] == "PENDING"


def test_nothing_to_stop_says_so(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "SUCCEEDED"))
    result = run("stop", "--all")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "no jobs to stop" in result.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("stop",), "name the jobs to stop"),
    (("stop", "j1", "--all"), "not both"),
    (("stop", "--all", "--state", "PENDING"), "drop --state"),
])
def test_stop_needs_one_way_to_choose(exchange: FakeExchange, args: tuple[str, ...],
                                      says: str) -> None:
    result = run(*args)
    assert result.exit_code == 2 and says in result.stderr
    assert exchange.requests == []


def test_at_a_terminal_yes_goes_ahead(exchange: FakeExchange, at_a_terminal: None) -> None:
    seed(exchange)
    result = run("stop", "j2", "j3", answer="y\n")
    assert result.exit_code == 0, result.output
    assert "stop 2 jobs (j2, j3)? [y/N]" in result.stderr
    assert cancelled(exchange) == ["j2", "j3"]


def test_at_a_terminal_no_does_nothing(exchange: FakeExchange, at_a_terminal: None) -> None:
    result = run("secrets", "rm", "HF_TOKEN", answer="\n")  # the default is no
    assert result.exit_code == 1
    assert "delete secret HF_TOKEN: not confirmed; nothing was done" in result.stderr
    assert exchange.requests == []


def test_revoke_and_rm_with_yes_and_json(exchange: FakeExchange) -> None:
    revoked = run("tokens", "revoke", "tok-1", "--yes", "--json")
    assert revoked.exit_code == 0, revoked.output
    assert json.loads(revoked.stdout)["id"] == "tok-1"
    removed = run("secrets", "rm", "-y", "HF_TOKEN")
    assert (removed.exit_code, removed.stdout) == (0, "")
    assert "secret HF_TOKEN deleted" in removed.stderr


def test_removing_a_fleets_hosts_asks_first_and_rm_is_its_other_name(
        exchange: FakeExchange, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bourse.fleets import store
    from bourse.fleets.store import Fleet, FleetHost

    monkeypatch.setenv("BOURSE_HOME", str(tmp_path))
    url = Client(URL, TOKEN).url
    store.save(Fleet(name="rack", exchange=url, price_per_hour=1.5, region="on-prem",
                     reach_each_other=False, hosts=[FleetHost("u@h1", "rack-h1", "n-1", 1.0)]))
    for name in ("remove", "rm"):
        refused = run("fleets", name, "rack")
        assert refused.exit_code == 2, refused.output
        assert "remove 1 host(s) of fleet rack: no terminal to confirm on" in refused.stderr
    assert [h.ssh for h in store.load(url)[0].hosts] == ["u@h1"]  # nothing was done
    assert [r.method for r in exchange.requests if r.method != "GET"] == []
    listed = run("fleets", "--help").output.split("Commands:")[1].splitlines()
    assert [line.split()[0] for line in listed if line.strip()] == ["add", "remove"]
