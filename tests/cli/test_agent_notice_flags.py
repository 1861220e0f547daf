"""`bourse agent`'s spot-notice flags (--spot-notice, --metadata-url and its variable) and
--token-file: what the agent is configured with, and the errors, before anything connects."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bourse.agent.daemon import AgentConfig, Spot
from bourse.cli import agent as agent_cli
from bourse.cli.main import cli


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> list[AgentConfig]:
    """The configs `bourse agent` would run with (nothing runs)."""
    seen: list[AgentConfig] = []

    async def run_agent(config: AgentConfig) -> None:
        seen.append(config)

    monkeypatch.setattr(agent_cli, "run_agent", run_agent)
    monkeypatch.delenv("BOURSE_METADATA_URL", raising=False)
    return seen


@pytest.fixture
def invoke(tmp_path: Path) -> Callable[..., Any]:
    def run(*args: str, env: dict[str, str] | None = None) -> Any:
        return CliRunner().invoke(cli, ["agent", "--server", "http://127.0.0.1:1", "--work-dir",
                                        str(tmp_path / "work"), *args], env=env)

    return run


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--spot-notice", "imds"], {}, "needs --interruptible"),
    (["--interruptible", "--metadata-url", "http://127.0.0.1:9"], {},
     "read only with --spot-notice imds"),
    (["--interruptible", "--spot-notice", "imds", "--metadata-url", "169.254.169.254"], {},
     "--metadata-url"),
    (["--interruptible", "--spot-notice", "imds"], {"BOURSE_METADATA_URL": "http://h/latest"},
     "has a path"),
    (["--interruptible", "--spot-notice", "aws"], {}, "--spot-notice"),
    (["--interruptible", "--spot-notice", "imds", "--spot-notice-interval", "0"], {},
     "--spot-notice-interval"),
    (["--token", "t", "--token-file", "/dev/null"], {}, "--token or --token-file"),
    (["--token-file", "/nonexistent/token"], {}, "cannot read /nonexistent/token"),
    (["--token-file", "/dev/null"], {}, "does not hold one token"),
])
def test_bad_notice_and_token_flags_are_refused(
        configured: list[AgentConfig], invoke: Callable[..., Any], args: list[str],
        env: dict[str, str], says: str) -> None:
    result = invoke(*args, env=env)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert configured == []


@pytest.mark.parametrize(("args", "env", "spot"), [
    (["--interruptible", "--spot-notice", "imds"], {},
     Spot(None, notice_url="http://169.254.169.254", notice_every_s=5.0)),
    (["--interruptible", "--spot-price", "0.4", "--spot-notice", "imds",
      "--metadata-url", "http://127.0.0.1:8111/", "--spot-notice-interval", "0.5"], {},
     Spot(0.4, notice_url="http://127.0.0.1:8111", notice_every_s=0.5)),
    (["--interruptible", "--spot-notice", "imds"], {"BOURSE_METADATA_URL": "http://[::1]:81"},
     Spot(None, notice_url="http://[::1]:81", notice_every_s=5.0)),
    # the variable alone (set machine-wide, say) watches nothing and refuses nothing
    (["--interruptible"], {"BOURSE_METADATA_URL": "http://127.0.0.1:1"}, Spot(None)),
    ([], {"BOURSE_METADATA_URL": "http://127.0.0.1:1"}, None),
])
def test_notice_flags_configure_the_agent(
        configured: list[AgentConfig], invoke: Callable[..., Any], args: list[str],
        env: dict[str, str], spot: Spot | None) -> None:
    result = invoke(*args, env=env)
    assert result.exit_code == 0, result.output
    assert [c.spot for c in configured] == [spot]


def test_the_token_is_read_from_its_file(configured: list[AgentConfig],
                                        invoke: Callable[..., Any], tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("e-secret-token\n")
    result = invoke("--token-file", str(path))
    assert result.exit_code == 0, result.output
    assert [c.token for c in configured] == ["e-secret-token"]
