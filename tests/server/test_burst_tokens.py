"""The start's burst token and address (pure); the route's use of them is in test_burst."""

from __future__ import annotations

from bourse.protocol.agent import StartJob
from bourse.server.services import tracking_tokens
from bourse.server.services.burst_tokens import job_of, mint, with_burst

KEY = b"k" * 32


def _start(**env: str) -> StartJob:
    return StartJob.model_validate({"job_id": "j-0123456789ab", "attempt": 1, "spec": {
        "command": ["true"], "env": env}})


def test_a_start_gets_the_address_and_a_secret_token_for_its_own_job() -> None:
    given = with_burst(_start(), KEY, "http://exchange:8470")
    assert given.env["BOURSE_URL"] == "http://exchange:8470"
    token = given.secret_env["BOURSE_BURST_TOKEN"]
    assert "BOURSE_BURST_TOKEN" not in given.env  # secret_env: masked, never spooled
    assert job_of(KEY, token) == "j-0123456789ab"
    tampered = token[:-1] + ("B" if token.endswith("A") else "A")
    assert job_of(b"x" * 32, token) is None and job_of(KEY, tampered) is None


def test_the_tracking_token_and_the_burst_token_do_not_pass_for_each_other() -> None:
    burst, tracking = mint(KEY, "j-a"), tracking_tokens.mint(KEY, "j-a")
    assert job_of(KEY, "bse_b_" + tracking[len("bse_r_"):]) is None
    assert tracking_tokens.job_of(KEY, "bse_r_" + burst[len("bse_b_"):]) is None


def test_a_job_that_names_its_exchange_keeps_it() -> None:
    given = with_burst(_start(BOURSE_URL="http://elsewhere:8470"), KEY, "http://exchange:8470")
    assert "BOURSE_URL" not in given.env and "BOURSE_BURST_TOKEN" in given.secret_env
