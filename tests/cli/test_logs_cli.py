"""``bourse logs``: stored output, one attempt, and ``-f`` until the job ends."""

from __future__ import annotations

import pytest
from cli_exchange import FakeExchange, chunk, job_view, sse
from click.testing import CliRunner, Result

from bourse.cli.logs import exit_code_for
from bourse.cli.main import cli
from bourse.protocol.api import JobView


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_prints_stored_output_to_matching_streams(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "RUNNING"))
    raw = "größe\n".encode()
    exchange.chunks["j1"] = [chunk(1, "out 1\n"), chunk(2, "err 1\n", "stderr"),
                             chunk(3, raw[:3]), chunk(4, raw[3:])]
    result = run("logs", "j1")
    assert result.exit_code == 0, result.output
    assert result.stdout == "out 1\ngröße\n"
    assert result.stderr == "err 1\n"


def test_pages_through_long_logs(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "SUCCEEDED"))
    exchange.chunks["j1"] = [chunk(n, f"{n}\n") for n in range(1, 2501)]
    result = run("logs", "j1")
    assert result.stdout.splitlines() == [str(n) for n in range(1, 2501)]
    assert sum(r.url.path.endswith("/logs") for r in exchange.requests) >= 3


def test_attempts_are_marked_and_filterable(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "SUCCEEDED"))
    exchange.chunks["j1"] = [chunk(1, "first try\n"), chunk(2, "second try\n", attempt=2)]
    result = run("logs", "j1")
    assert result.stdout == "first try\nsecond try\n"
    assert result.stderr == "--- attempt 2 ---\n"
    only = run("logs", "j1", "--attempt", "2")
    assert (only.stdout, only.stderr) == ("second try\n", "")


def test_follow_exits_with_the_jobs_code(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "RUNNING"))
    exchange.follow["j1"] = [
        ": keep-alive\n\n", sse("chunk", chunk(1, "working\n")),
        sse("end", job_view("j1", "FAILED", exit_code=7, reason="exited with code 7")),
    ]
    result = run("logs", "-f", "j1")
    assert result.exit_code == 7
    assert result.stdout == "working\n"
    assert result.stderr == "job j1 failed with exit code 7: exited with code 7\n"


def test_unknown_job(exchange: FakeExchange) -> None:
    result = run("logs", "-f", "nope")
    assert result.exit_code == 1
    assert "no job nope" in result.stderr


@pytest.mark.parametrize(("state", "code", "expected"), [
    ("SUCCEEDED", 0, 0), ("FAILED", 3, 3), ("FAILED", None, 1), ("FAILED", 0, 1),
    ("FAILED", -9, 137), ("FAILED", 300, 1), ("CANCELLED", None, 130), ("CANCELLED", -15, 130),
])
def test_exit_codes(state: str, code: int | None, expected: int) -> None:
    view = JobView.model_validate(job_view("j", state, exit_code=code))
    assert exit_code_for(view) == expected
