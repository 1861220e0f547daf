"""Settings of ``bourse server`` and ``bourse agent``: flag > BOURSE_* variable > config file >
default, as ``--show-config`` reports them; the file's errors; the values reaching the
coordinator's and the agent's config; the docs' table kept equal to the flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from bourse.agent.daemon import AgentConfig
from bourse.cli import agent as agent_cli
from bourse.cli import server as server_cli
from bourse.cli import settings as settings_mod
from bourse.cli.main import cli
from bourse.cli.settings import env_names, parse_settings, setting_options
from bourse.cli.show_config import doc_tables, mask_url, refresh_doc
from bourse.core.errors import InvalidInput
from bourse.server.config import ServerConfig

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A BOURSE_HOME of its own, no system file, no settings variables from the shell."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("BOURSE_HOME", str(home))
    monkeypatch.setattr(settings_mod, "SYSTEM_DIR", tmp_path / "etc")
    for name in list(os.environ):
        if name.startswith("BOURSE_") and name != "BOURSE_HOME":
            monkeypatch.delenv(name)
    return home


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def shown(*args: str, env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    result = run(*args, "--show-config", "--json", env=env)
    assert result.exit_code == 0, result.output
    return {s["setting"]: s for s in json.loads(result.stdout)["settings"]}


def test_a_flag_beats_its_variable_which_beats_the_file_which_beats_the_default(
        isolated: Path) -> None:
    (isolated / "server.toml").write_text(
        'host = "file-host"\nport = 9000\nlog-level = "warning"\nstore_bucket = "from-file"\n')
    got = shown("server", "--host", "flag-host",
                env={"BOURSE_HOST": "env-host", "BOURSE_PORT": "9100"})
    file = str(isolated / "server.toml")
    assert {k: (got[k]["value"], got[k]["source"], got[k]["from"]) for k in (
        "host", "port", "log-level", "store-bucket", "keep-alive")} == {
        "host": ("flag-host", "flag", None),
        "port": (9100, "env", "BOURSE_PORT"),
        "log-level": ("warning", "file", file),
        "store-bucket": ("from-file", "file", file),
        "keep-alive": (20.0, "default", None)}


def test_the_file_is_named_by_flag_or_variable_and_none_reads_none(
        isolated: Path, tmp_path: Path) -> None:
    (isolated / "server.toml").write_text("port = 1111\n")
    other = tmp_path / "other.toml"
    other.write_text("port = 2222\n")
    assert shown("server")["port"]["value"] == 1111
    assert shown("server", "--config", str(other))["port"]["value"] == 2222
    assert shown("server", env={"BOURSE_SERVER_CONFIG": str(other)})["port"]["value"] == 2222
    assert shown("server", "--config", "none")["port"]["source"] == "default"


def test_the_system_file_is_read_when_the_users_is_missing(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "agent.toml").write_text('server = "http://coord:8470"\n')
    assert shown("agent")["server"]["value"] == "http://coord:8470"


def test_the_old_variable_names_still_work_and_the_alias_of_the_database_url(
        isolated: Path) -> None:
    server = shown("server", env={"BOURSE_CLOUDS": "aws", "BOURSE_DB_URL": "sqlite:///x.db"})
    assert server["cloud"]["value"] == ["aws"] and server["cloud"]["from"] == "BOURSE_CLOUDS"
    assert server["database-url"]["from"] == "BOURSE_DB_URL"
    agent = shown("agent", env={"BOURSE_NETWORK": "lab", "BOURSE_ADDRESS": "10.0.0.2",
                                "BOURSE_METADATA_URL": "http://127.0.0.1:9"})
    assert [agent[k]["source"] for k in ("network", "address", "metadata-url")] == ["env"] * 3


def test_secrets_are_masked_in_text_and_json(isolated: Path) -> None:
    env = {"BOURSE_AGENT_TOKEN": "enrol-s3cret",
           "BOURSE_AGENT_INDEX_URL": "https://me:pypi-s3cret@pypi.example.com/simple"}
    text = run("agent", "--show-config", env=env)
    as_json = run("agent", "--show-config", "--json", env=env)
    server = run("server", "--database-url", "postgresql+asyncpg://u:db-s3cret@h/db",
                 "--show-config")
    for result in (text, as_json, server):
        assert result.exit_code == 0, result.output
        assert "s3cret" not in result.output
    assert "https://me:***@pypi.example.com/simple" in text.stdout
    assert "postgresql+asyncpg://u:***@h/db" in server.stdout
    assert json.loads(as_json.stdout)["settings"][1] == {
        "setting": "token", "flag": "--token", "value": "***", "source": "env",
        "from": "BOURSE_AGENT_TOKEN"}


def test_the_agent_never_reads_the_clis_token(isolated: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's API token in BOURSE_TOKEN is not an enrolment token."""
    seen: list[AgentConfig] = []

    async def run_agent(config: AgentConfig) -> None:
        seen.append(config)

    monkeypatch.setattr(agent_cli, "run_agent", run_agent)
    (isolated / "agent.toml").write_text(
        f'server = "http://127.0.0.1:1"\nwork-dir = "{isolated / "w"}"\nkeep-alive = 7\n'
        'interruptible = true\nname = "from-file"\n')
    result = run("agent", "--name", "from-flag",
                 env={"BOURSE_TOKEN": "user-api-token", "BOURSE_AGENT_CPUS": "3"})
    assert result.exit_code == 0, result.output
    config = seen[0]
    assert (config.server, config.work_dir, config.keep_alive_s, config.name, config.cpus) == (
        "http://127.0.0.1:1", isolated / "w", 7.0, "from-flag", 3)
    assert config.spot is not None and config.token is None


class Built(Exception):
    """Raised in place of building the app: the config is what the test wants."""


def test_file_values_reach_the_coordinators_config(isolated: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[ServerConfig] = []

    def create_app(config: ServerConfig) -> Any:
        built.append(config)
        raise Built

    monkeypatch.setattr(server_cli, "create_app", create_app)
    monkeypatch.setattr(os, "umask", lambda mask: mask)  # the command sets it for its process
    (isolated / "server.toml").write_text(
        f'data-dir = "{tmp_path / "data"}"\nport = 0\nno-store = true\nloss-window = 300\n'
        'metrics-raw-hours = 12\nallow-unverified = true\n')
    result = run("server", env={"BOURSE_KEEP_ALIVE": "15"})
    assert isinstance(result.exception, Built), result.output
    config = built[0]
    assert config.data_dir == tmp_path / "data" and config.store.kind == "none"
    assert (config.loss_window_s, config.keep_alive_s, config.allow_unverified) == (
        300.0, 15.0, True)
    assert config.metrics.raw_retention_s == 12 * 3600


def options(command: click.Command) -> list[click.Option]:
    return setting_options(command)


@pytest.mark.parametrize(("text", "says"), [
    ("port = 1\nprot = 2\n", "server.toml:2: unknown setting 'prot' — did you mean 'port'?"),
    ("[store]\nendpoint = 'x'\n", "server.toml:1: unknown setting 'store' — settings are "
                                  "top-level keys, not tables: write store-endpoint = ..."),
    ("zzz = 'red'\n", "unknown setting 'zzz' — the keys are the flags' names"),
    ("port = \n", "server.toml: not valid TOML: Invalid value (at line 1, column 8)"),
    ("port = 'x'\n", "server.toml:1: port: 'x' is not a valid integer range"),
    ("port = 70000\n", "server.toml:1: port: 70000 is not in the range 0<=x<=65535"),
    ("no-store = 'yes'\n", "server.toml:1: no-store: give true or false, not 'yes'"),
    ("host = true\n", "server.toml:1: host: give a string or a number, not True"),
    ("host = ['a', 'b']\n", "server.toml:1: host: give one value, not a list"),
    ("log-level = 'loud'\n", "server.toml:1: log-level: 'loud' is not one of"),
    ("cloud = [1.5, {a = 1}]\n", "server.toml:1: cloud: give a string or a number"),
])
def test_a_bad_file_is_refused_naming_the_file_the_line_and_the_fix(text: str,
                                                                     says: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_settings(text, Path("/etc/bourse/server.toml"), options(server_cli.server))
    assert says in str(caught.value)


def test_a_good_file_becomes_the_default_map() -> None:
    text = 'cloud = "aws"\nstore_bucket = "b"\nallow-unverified = true\nkeep-alive = 5\n'
    assert parse_settings(text, Path("s.toml"), options(server_cli.server)) == {
        "clouds": ["aws"], "store_bucket": "b", "allow_unverified": True, "keep_alive": 5}


def test_the_command_refuses_a_bad_file_before_it_starts(isolated: Path) -> None:
    (isolated / "server.toml").write_text("prot = 1\n")
    result = run("server")
    assert result.exit_code == 2
    assert f"{isolated / 'server.toml'}:1: unknown setting 'prot'" in result.output
    missing = run("server", "--config", str(isolated / "nope.toml"))
    assert missing.exit_code == 2 and "cannot read the config file" in missing.output
    assert "--json goes with --show-config" in run("server", "--config", "none",
                                                   "--json").output


def test_every_setting_has_its_own_variable_shown_in_help() -> None:
    names: dict[str, list[str]] = {}
    for command, settings in ((server_cli.server, server_cli.SETTINGS),
                              (agent_cli.agent, agent_cli.SETTINGS)):
        for option in options(command):
            assert option.show_envvar, option.name
            names.setdefault(command.name or "", []).extend(env_names(option, settings))
    for found in names.values():
        assert len(found) == len(set(found))  # no two settings share a variable
    assert set(names["server"]).isdisjoint(names["agent"])
    assert "env var: BOURSE_AGENT_SERVER" in " ".join(run("agent", "--help").output.split())


def test_mask_url_keeps_what_has_no_password() -> None:
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("https://:tok@h") == "https://:***@h"
    assert mask_url("not a url") == "not a url"


def test_the_docs_table_is_the_flags() -> None:
    text = DOC.read_text()
    assert refresh_doc(text, doc_tables()) == text, (
        "docs/configuration.md drifted from the flags: run "
        "`.venv/bin/python -m bourse.cli.show_config docs/configuration.md`")


@pytest.mark.slow  # one real process: importing the coordinator takes seconds on 2 cores
def test_the_real_command_shows_its_config_and_starts_nothing(isolated: Path,
                                                              tmp_path: Path) -> None:
    data = tmp_path / "data"
    (isolated / "server.toml").write_text(f'data-dir = "{data}"\nport = 9000\n')
    env = {**os.environ, "BOURSE_PORT": "9100", "BOURSE_DATABASE_URL": "postgresql://u:pw@h/d"}
    done = subprocess.run([sys.executable, "-m", "bourse", "server", "--show-config",
                           "--json", "--log-level", "debug"], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    got = {s["setting"]: (s["value"], s["source"]) for s in view["settings"]}
    assert view["file"] == str(isolated / "server.toml")
    assert got["data-dir"] == (str(data), "file") and got["port"] == (9100, "env")
    assert got["log-level"] == ("debug", "flag")
    assert got["database-url"] == ("postgresql://u:***@h/d", "env")
    assert not data.exists()  # nothing was started, not even the data dir
