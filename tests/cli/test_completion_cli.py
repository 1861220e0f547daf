"""`bourse completion SHELL` and the completion of job and node ids from the exchange."""

from __future__ import annotations

import subprocess

import pytest
from cli_exchange import FakeExchange, job_view
from click.testing import CliRunner, Result

from bourse.cli import client as seam
from bourse.cli.main import cli
from bourse.sdk.client import Client


def complete(line: str) -> Result:
    """What bash's completion asks for the last word of ``line``."""
    words = line.split(" ")
    env = {"_BOURSE_COMPLETE": "bash_complete", "COMP_WORDS": line,
           "COMP_CWORD": str(len(words) - 1)}
    return CliRunner().invoke(cli, [], env=env, prog_name="bourse")


def offered(result: Result) -> list[str]:
    """The values in bash's ``type,value`` lines."""
    return [line.split(",", 1)[1] for line in result.stdout.splitlines() if line]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_of_each_shell(shell: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert "_BOURSE_COMPLETE" in result.stdout
    assert f"{shell}_complete" in result.stdout  # what it asks the command for


def test_an_unknown_shell_is_bad_input() -> None:
    result = CliRunner().invoke(cli, ["completion", "tcsh"])
    assert result.exit_code == 2 and "'tcsh' is not one of" in result.stderr


def test_the_script_really_completes_in_bash() -> None:
    # bash itself sources the script and registers the completion function
    script = CliRunner().invoke(cli, ["completion", "bash"]).stdout
    check = subprocess.run(["bash", "-c", f"{script}\ncomplete -p bourse"],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    assert "_bourse_completion" in check.stdout


def test_commands_complete() -> None:
    assert offered(complete("bourse jo")) == ["jobs"]


def test_job_ids_complete_from_the_exchange(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "RUNNING", name="train"))
    exchange.add_job(job_view("j2", "PENDING"))
    exchange.add_job(job_view("x9", "PENDING"))
    assert sorted(offered(complete("bourse logs j"))) == ["j1", "j2"]
    assert offered(complete("bourse stop -y j1 j2 x")) == ["x9"]
    assert offered(complete("bourse jobs show j1")) == ["j1"]


def test_node_refs_complete_by_id_and_name(exchange: FakeExchange) -> None:
    exchange.nodes = [{"id": "n-1a", "name": "box", "state": "online", "keep_alive_s": 30,
                       "created_at": 0, "connected": True}]
    assert offered(complete("bourse nodes show ")) == ["n-1a", "box"]
    assert offered(complete("bourse nodes reclaim ")) == ["n-1a"]


def test_completion_is_silent_when_the_exchange_is_not_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(timeout: float = 30.0) -> Client:
        assert timeout <= 2.0  # a Tab never waits long
        return Client("http://127.0.0.1:9", "t", timeout=timeout)  # nothing listens on 9

    monkeypatch.setattr(seam, "open_client", unreachable)
    result = complete("bourse logs j")
    assert (result.exit_code, result.stdout.strip(), result.stderr) == (0, "", "")

