"""``bourse context`` and ``bourse --context``: contexts in an isolated BOURSE_HOME, tokens
never shown, and the context a command uses deciding which exchange it talks to."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_exchange import TOKEN, URL, FakeExchange
from click.testing import CliRunner, Result

from bourse.cli import access
from bourse.cli import client as seam
from bourse.cli import confirm as confirming
from bourse.cli.main import cli
from bourse.sdk.client import Client
from bourse.sdk.contexts import load_contexts

SECRET = "tok-never-shown"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path))
    for name in ("BOURSE_URL", "BOURSE_TOKEN", "BOURSE_CONTEXT"):
        monkeypatch.setenv(name, "")  # recorded, so that teardown puts back what was there
        monkeypatch.delenv(name)
    return tmp_path


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin)


def add(name: str, url: str, token: str = SECRET, *extra: str) -> Result:
    result = run("context", "add", name, "--url", url, "--token-stdin", *extra,
                 stdin=token + "\n")
    assert result.exit_code == 0, result.output
    return result


def test_add_stores_the_token_privately_and_the_first_becomes_current(home: Path) -> None:
    result = add("prod", "https://bourse.example.com/")
    assert "added context prod (https://bourse.example.com)" in result.stderr
    assert "current" in result.stderr
    path = home / "contexts.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "current": "prod",
        "contexts": {"prod": {"url": "https://bourse.example.com", "token": SECRET}}}
    add("lab", "http://10.0.0.5:8470")
    assert load_contexts().current == "prod"  # a second one is not made current unasked
    add("lab2", "http://10.0.0.6:8470", SECRET, "--use")
    assert load_contexts().current == "lab2"


@pytest.mark.parametrize(("args", "says"), [
    (["--token", "t", "--token-stdin"], "--token: give the token once"),
    ([], "--token: no token given — pipe it in with --token-stdin"),
    (["--token", " "], "token: the token is empty"),
    (["--token", "t", "--url", "localhost:8470"], "url: 'localhost:8470' is not an exchange URL"),
])
def test_bad_adds_are_refused_and_write_nothing(home: Path, args: list[str],
                                                says: str) -> None:
    url = [] if "--url" in args else ["--url", "http://x:1"]
    result = run("context", "add", "prod", *url, *args)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert not (home / "contexts.json").exists()


def test_list_marks_the_one_in_use_and_never_shows_a_token(home: Path) -> None:
    add("prod", "https://p.example.com")
    add("lab", "http://lab:8470")
    listed = run("context", "list")
    assert listed.exit_code == 0
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["CURRENT", "NAME", "URL"]
    assert lines[1].split() == ["*", "prod", "https://p.example.com"]
    assert lines[2].split() == ["lab", "http://lab:8470"]
    as_json = json.loads(run("--context", "lab", "context", "list", "--json").stdout)
    assert as_json == [{"name": "prod", "url": "https://p.example.com", "current": False},
                       {"name": "lab", "url": "http://lab:8470", "current": True}]
    assert SECRET not in listed.output + json.dumps(as_json)


def test_use_switches_and_an_unknown_name_gets_the_nearest(home: Path) -> None:
    add("prod", "https://p.example.com")
    add("lab", "http://lab:8470")
    assert run("context", "use", "lab").exit_code == 0
    assert load_contexts().current == "lab"
    wrong = run("context", "use", "prdo")
    assert wrong.exit_code == 2
    assert "no context 'prdo'" in wrong.stderr and "did you mean 'prod'?" in wrong.stderr


def test_show_says_where_the_url_and_token_come_from(home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    add("prod", "https://p.example.com")
    shown = run("context", "show")
    assert shown.exit_code == 0, shown.output
    assert "context: prod (current)" in shown.stdout
    assert "url:     https://p.example.com (from context prod)" in shown.stdout
    monkeypatch.setenv("BOURSE_URL", "http://override:1")
    view = json.loads(run("context", "show", "--json").stdout)
    assert view["url"] == "http://override:1" and view["url_from"] == "BOURSE_URL"
    assert view["token_from"] == "context prod"
    assert SECRET not in shown.output + json.dumps(view)


def test_show_without_any_exchange_says_what_to_do(home: Path) -> None:
    result = run("context", "show")
    assert result.exit_code == 2
    assert "bourse context add" in result.stderr


def test_rm_needs_a_yes_without_a_terminal(home: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    add("prod", "https://p.example.com")
    add("lab", "http://lab:8470")
    refused = run("context", "rm", "lab")
    assert refused.exit_code == 2 and "pass --yes" in refused.stderr
    assert load_contexts().names == ["prod", "lab"]
    monkeypatch.setattr(confirming, "terminal", lambda: True)
    assert run("context", "rm", "lab", stdin="n\n").exit_code == 1  # answered no
    assert run("context", "rm", "lab", stdin="y\n").exit_code == 0
    removed = run("context", "rm", "-y", "prod")
    assert removed.exit_code == 0 and "no context is current now" in removed.stderr
    assert load_contexts().names == [] and load_contexts().current is None


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeExchange:
    """The CLI's client seam on the fake exchange, credentials resolved as usual."""
    exchange = FakeExchange()

    def open_client() -> Client:
        return Client(transport=httpx.MockTransport(exchange))

    monkeypatch.setattr(seam, "open_client", open_client)
    return exchange


def test_dash_dash_context_picks_the_exchange_of_one_command(home: Path,
                                                             fake: FakeExchange) -> None:
    add("stale", URL, "revoked-token")  # current: the fake exchange refuses its token
    add("good", URL, TOKEN)
    assert run("jobs").exit_code != 0
    assert fake.requests[-1].headers["authorization"] == "Bearer revoked-token"
    listed = run("--context", "good", "jobs", "--json")
    assert listed.exit_code == 0, listed.output
    assert fake.requests[-1].headers["authorization"] == f"Bearer {TOKEN}"
    assert "no context 'god'" in run("--context", "god", "jobs").stderr
    assert "BOURSE_CONTEXT" not in os.environ  # the command's alone


def test_login_writes_a_context_and_makes_it_current(home: Path, fake: FakeExchange,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def client(url: str, token: str, **_: Any) -> Client:
        return Client(url, token, transport=httpx.MockTransport(fake))

    monkeypatch.setattr(access, "Client", client)
    add("other", "http://other:1")
    result = run("login", URL, "--token", TOKEN)
    assert result.exit_code == 0, result.output
    stored = load_contexts()
    assert stored.current == "default" and stored.get("default").token == TOKEN
    assert run("login", URL, "--token", TOKEN, "--name", "lab").exit_code == 0
    assert load_contexts().current == "lab"
    assert run("login", URL, "--token", "wrong", "--name", "bad").exit_code != 0
    assert load_contexts().find("bad") is None  # a refused token is not kept


def test_json_says_what_each_change_did_and_never_the_token(
        home: Path, fake: FakeExchange, monkeypatch: pytest.MonkeyPatch) -> None:
    def client(url: str, token: str, **_: Any) -> Client:
        return Client(url, token, transport=httpx.MockTransport(fake))

    monkeypatch.setattr(access, "Client", client)
    added = add("lab", "http://lab:1", SECRET, "--json")
    assert json.loads(added.stdout) == {"name": "lab", "url": "http://lab:1", "action": "added",
                                        "file": str(home / "contexts.json"), "current": "lab"}
    add("prod", "http://prod:1", SECRET)
    assert json.loads(run("context", "use", "prod", "--json").stdout) == {
        "current": "prod", "url": "http://prod:1"}
    assert json.loads(run("context", "rm", "lab", "-y", "--json").stdout) == {
        "removed": "lab", "current": "prod"}
    logged = run("login", URL, "--token", TOKEN, "--json")
    assert logged.exit_code == 0, logged.output
    assert json.loads(logged.stdout)["context"] == "default"
    every = added.stdout + logged.stdout
    assert SECRET not in every and TOKEN not in every
