"""``bourse logs``: stored output, one attempt, one gang member or all of them prefixed with
their rank, JSON lines, and ``-f`` until the job ends."""

from __future__ import annotations

import json
from typing import Any

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


def gang(job_id: str, state: str, members: int = 2, **extra: Any) -> dict[str, Any]:
    return job_view(job_id, state, spec={"command": ["python", "t.py"],
                                         "compute": {"num_nodes": members}}, **extra)


GANG_CHUNKS = [  # two members writing at once; rank 1's lines are split across chunks
    chunk(1, "r0 one\nr0 tw", rank=0), chunk(2, "r1 ha", rank=1), chunk(3, "o\n", rank=0),
    chunk(4, "r1 err", "stderr", rank=1), chunk(5, "lf\n", rank=1),
    chunk(6, "or\n", "stderr", rank=1), chunk(7, "r0 tail", rank=0),
]


def test_a_gangs_lines_are_prefixed_with_their_rank_and_never_mixed(
        exchange: FakeExchange) -> None:
    exchange.add_job(gang("g1", "SUCCEEDED"))
    exchange.chunks["g1"] = GANG_CHUNKS
    result = run("logs", "g1")
    assert result.exit_code == 0, result.output
    assert result.stdout == ("[rank 0] r0 one\n[rank 0] r0 two\n[rank 1] r1 half\n"
                             "[rank 0] r0 tail\n")  # the unfinished last line ends the output
    assert result.stderr == "[rank 1] r1 error\n"


def test_one_members_output_is_shown_as_it_is(exchange: FakeExchange) -> None:
    exchange.add_job(gang("g1", "SUCCEEDED"))
    exchange.chunks["g1"] = GANG_CHUNKS
    result = run("logs", "g1", "--rank", "1")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "r1 half\n", "r1 error\n")
    assert all(r.url.params["rank"] == "1" for r in exchange.requests
               if r.url.path.endswith("/logs"))
    assert run("logs", "g1", "--rank", "0").stdout == "r0 one\nr0 two\nr0 tail"


def test_a_one_node_jobs_output_is_unchanged_byte_for_byte(exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "SUCCEEDED"))
    raw = [b"a\r\nhalf", b" line\n\n", b"no newline at the end"]
    exchange.chunks["j1"] = [chunk(n, data) for n, data in enumerate(raw, 1)]
    result = run("logs", "j1")
    assert result.stdout_bytes == b"".join(raw)


def test_json_lines_name_each_lines_attempt_rank_stream_and_time(exchange: FakeExchange) -> None:
    exchange.add_job(gang("g1", "SUCCEEDED"))
    exchange.chunks["g1"] = [*GANG_CHUNKS[:3],
                             {**chunk(8, "r0 retry\n", attempt=2), "time": 1700000000.5}]
    result = run("logs", "g1", "--json")
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"attempt": 1, "rank": 0, "stream": "stdout", "text": "r0 one", "time": None},
        {"attempt": 1, "rank": 0, "stream": "stdout", "text": "r0 two", "time": None},
        {"attempt": 1, "rank": 1, "stream": "stdout", "text": "r1 ha",  # cut by the attempt
         "time": None},
        {"attempt": 2, "rank": 0, "stream": "stdout", "text": "r0 retry",
         "time": 1700000000.5},
    ]
    assert result.stderr == ""


def test_a_new_attempt_ends_the_last_ones_unfinished_lines(exchange: FakeExchange) -> None:
    exchange.add_job(gang("g1", "SUCCEEDED"))
    exchange.chunks["g1"] = [chunk(1, "r1 cut", rank=1), chunk(2, "again\n", attempt=2)]
    result = run("logs", "g1")
    assert result.stdout == "[rank 1] r1 cut\n[rank 0] again\n"
    assert result.stderr == "--- attempt 2 ---\n"


def test_follow_prefixes_a_gang_and_shows_one_member_as_it_is(exchange: FakeExchange) -> None:
    exchange.add_job(gang("g1", "RUNNING"))
    exchange.follow["g1"] = [
        *(sse("chunk", c) for c in GANG_CHUNKS[:3]), ": keep-alive\n\n",
        sse("chunk", GANG_CHUNKS[4]),
        sse("end", gang("g1", "FAILED", exit_code=3, reason="rank 1 exited with code 3")),
    ]
    every = run("logs", "-f", "g1")
    assert every.exit_code == 3
    assert every.stdout == "[rank 0] r0 one\n[rank 0] r0 two\n[rank 1] r1 half\n"
    one = run("logs", "-f", "g1", "--rank", "1")
    assert (one.exit_code, one.stdout) == (3, "r1 half\n")
    follows = [r for r in exchange.requests if r.url.path.endswith("/follow")]
    assert [r.url.params.get("rank") for r in follows] == [None, "1"]
    as_json = run("logs", "-f", "g1", "--json")
    assert [json.loads(x)["rank"] for x in as_json.stdout.splitlines()] == [0, 0, 1]


def test_a_rank_the_job_lacks_is_an_error_naming_it(exchange: FakeExchange) -> None:
    exchange.add_job(gang("g1", "RUNNING"))
    result = run("logs", "g1", "--rank", "2")
    assert result.exit_code == 2
    assert "rank 2 is not a member of job g1" in result.stderr
    negative = run("logs", "g1", "--rank", "-1")
    assert negative.exit_code == 2
    assert "--rank" in negative.stderr


def test_a_log_the_exchange_pruned_says_so_and_an_empty_one_does_not(
        exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "SUCCEEDED"))
    exchange.add_job(job_view("j2", "SUCCEEDED"))
    exchange.pruned.add("j1")
    pruned = run("logs", "j1")
    assert (pruned.exit_code, pruned.stdout) == (0, "")
    assert "the logs of j1 were deleted by the exchange's log retention" in pruned.stderr
    empty = run("logs", "j2")
    assert (empty.exit_code, empty.stdout, empty.stderr) == (0, "", "")


def test_following_a_pruned_log_says_so_and_exits_with_the_jobs_code(
        exchange: FakeExchange) -> None:
    exchange.add_job(job_view("j1", "FAILED", exit_code=3))
    exchange.pruned.add("j1")
    exchange.follow["j1"] = [sse("end", job_view("j1", "FAILED", exit_code=3))]
    result = run("logs", "-f", "j1")
    assert result.exit_code == 3
    assert "deleted by the exchange's log retention" in result.stderr
