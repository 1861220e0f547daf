"""``GET /api/v1/runs?app=``: runs found by their app's name (part of it, any case), through
the SDK as ``bourse runs --app`` calls it; on SQLite and PostgreSQL (the name sits in the job's
JSON spec)."""

from __future__ import annotations

import pytest
from server_harness import Exchange

pytestmark = pytest.mark.anyio


async def _run(exchange: Exchange, run: str, app: str, stages: int = 2) -> None:
    for number in range(stages):
        await exchange.submit(name=f"{run}/s{number}", run=run, app=app, stage=f"s{number}")
        exchange.clock.advance(1)


async def _listed(exchange: Exchange, **params: str | int) -> list[tuple[str, str]]:
    response = await exchange.client.get("/api/v1/runs", params=params)
    assert response.status_code == 200, response.text
    return [(r["id"], r["app"]) for r in response.json()["runs"]]


async def test_runs_are_found_by_the_name_of_their_app(exchange: Exchange) -> None:
    await _run(exchange, "r-1", "digits.py")
    await _run(exchange, "r-2", "finetune_llm.py")
    await _run(exchange, "r-3", "Digits_v2.py")
    await exchange.submit(name="plain")  # of no run
    assert await _listed(exchange) == [("r-3", "Digits_v2.py"), ("r-2", "finetune_llm.py"),
                                       ("r-1", "digits.py")]
    assert await _listed(exchange, app="digits") == [("r-3", "Digits_v2.py"),
                                                     ("r-1", "digits.py")]
    assert await _listed(exchange, app="DIGITS", limit=1) == [("r-3", "Digits_v2.py")]
    assert await _listed(exchange, app="finetune_llm.py") == [("r-2", "finetune_llm.py")]
    assert await _listed(exchange, app="%") == []  # a pattern character is only itself
    assert await _listed(exchange, app="whisper") == []


async def test_an_app_filter_too_long_is_refused_naming_the_parameter(exchange: Exchange) -> None:
    response = await exchange.client.get("/api/v1/runs", params={"app": "x" * 201})
    assert response.status_code == 422
    assert "app" in response.text
