"""Project secrets: sealed at rest, never returned, given only to the jobs that name them, and
redacted (as they are and encoded) from logs and events before they are stored."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any
from unittest.mock import ANY
from urllib.parse import quote

import pytest
from fake_agent import FakeAgent
from server_harness import Exchange, Live, job_spec, place_job, until

from bourse.server.db.schema import Secret

pytestmark = pytest.mark.anyio
# every start carries its job's tracking token (services.tracking_tokens)
TRACKED = {"MLFLOW_TRACKING_TOKEN": ANY, "BOURSE_BURST_TOKEN": ANY}  # every job's
VALUE = "s3cr3t-Value/with+odd&chars"
Factory = Callable[..., Any]


async def _set(exchange: Exchange, name: str = "API_TOKEN", value: str = VALUE,
               headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = await exchange.client.put(f"/api/v1/secrets/{name}", json={"value": value},
                                         headers=headers)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_secret_is_sealed_and_never_returned(exchange: Exchange) -> None:
    made = await _set(exchange)
    assert set(made) == {"name", "created_at", "updated_at"}
    listed = await exchange.client.get("/api/v1/secrets")
    assert [s["name"] for s in listed.json()["secrets"]] == ["API_TOKEN"]
    assert VALUE not in listed.text
    row: Secret = await exchange.row(Secret, ("default", "API_TOKEN"))
    assert VALUE.encode() not in row.ciphertext and len(row.ciphertext) > len(VALUE)
    key = exchange.config.data_dir / "server.key"
    assert os.stat(key).st_mode & 0o777 == 0o600


async def test_replacing_and_deleting(exchange: Exchange) -> None:
    await _set(exchange)
    exchange.clock.advance(5)
    again = await _set(exchange, value="another-value")
    assert again["updated_at"] == again["created_at"] + 5
    gone = await exchange.client.delete("/api/v1/secrets/API_TOKEN")
    assert gone.status_code == 200
    missing = await exchange.client.delete("/api/v1/secrets/API_TOKEN")
    assert missing.status_code == 404


@pytest.mark.parametrize("name, body, field", [
    ("API_TOKEN", {"value": "short"}, "value"), ("API_TOKEN", {}, "value"),
    ("API_TOKEN", {"value": "a\u0000bcdefgh"}, "value"), ("1BAD", {"value": VALUE}, None)])
async def test_bad_secrets_are_refused(exchange: Exchange, name: str, body: dict[str, Any],
                                       field: str | None) -> None:
    response = await exchange.client.put(f"/api/v1/secrets/{name}", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field or field is None
    assert VALUE not in response.text


async def test_a_job_may_name_only_its_projects_secrets(exchange: Exchange) -> None:
    beta = {"Authorization": f"Bearer {await exchange.project_token('beta-labs')}"}
    await _set(exchange)  # in the default project
    refused = await exchange.client.post("/api/v1/jobs", headers=beta,
                                         json=job_spec(project_secrets=["API_TOKEN"]))
    assert refused.status_code == 422
    assert refused.json()["field"] == "project_secrets"
    assert (await exchange.client.post("/api/v1/jobs", json=job_spec(
        project_secrets=["API_TOKEN"]))).status_code == 201


async def test_only_the_jobs_that_name_a_secret_get_it(live: Live, agent_factory: Factory,
                                                      ) -> None:
    exchange = live.exchange
    await _set(exchange)
    agent: FakeAgent = await agent_factory(cpus=4)
    named = await exchange.submit(project_secrets=["API_TOKEN"])
    plain = await exchange.submit()
    await exchange.tick()
    start = await agent.expect("start_job", job_id=named["id"])
    other = await agent.expect("start_job", job_id=plain["id"])
    assert start["secret_env"] == {"API_TOKEN": VALUE, **TRACKED}
    assert "API_TOKEN" not in start["env"] and set(other.get("secret_env") or {}) <= set(TRACKED)
    shown = await exchange.client.get(f"/api/v1/jobs/{named['id']}")
    assert VALUE not in shown.text and shown.json()["spec"]["project_secrets"] == ["API_TOKEN"]


async def test_a_secret_deleted_before_the_start_is_not_sent(live: Live,
                                                             agent_factory: Factory) -> None:
    exchange = live.exchange
    await _set(exchange)
    job = await exchange.submit(project_secrets=["API_TOKEN"])
    await exchange.client.delete("/api/v1/secrets/API_TOKEN")
    agent: FakeAgent = await agent_factory()
    await exchange.tick()

    async def said() -> bool:
        messages = [e["message"] for e in await exchange.events(job["id"])]
        return any("secrets could not be read" in m for m in messages)

    await until(said)  # recorded by the hub's dispatcher, after the placing commit
    await agent.barrier()
    assert not agent.received("start_job")


def _forms(value: str) -> list[bytes]:
    raw = value.encode()
    return [raw, base64.b64encode(raw), base64.b64encode(b"x" + raw + b"yz"), raw.hex().encode(),
            quote(value, safe="").encode(), base64.urlsafe_b64encode(b"ab" + raw)]


async def test_secrets_are_redacted_from_logs_and_events(live: Live,
                                                         agent_factory: Factory) -> None:
    exchange = live.exchange
    await _set(exchange)
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent, project_secrets=["API_TOKEN"])
    printed = b"\n".join(b"line " + form for form in _forms(VALUE)) + b"\n"
    await agent.log(job_id, attempt, 1, printed)
    await agent.event(job_id, attempt, "start_failed", reason=f"could not use {VALUE}")
    logs = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")
    stored = b"".join(base64.b64decode(c["data"]) for c in logs.json()["chunks"])
    assert stored.count(b"[redacted]") == len(_forms(VALUE)), stored
    for form in _forms(VALUE):
        assert form not in stored
    events = await exchange.client.get(f"/api/v1/jobs/{job_id}/events")
    assert VALUE not in events.text and "[redacted]" in events.text
    job = await exchange.job(job_id)
    assert VALUE not in str(job)


async def test_redaction_survives_a_coordinator_restart(live: Live,
                                                        agent_factory: Factory) -> None:
    """The values of running attempts are read again when the hub no longer has them."""
    exchange = live.exchange
    await _set(exchange)
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent, project_secrets=["API_TOKEN"])
    exchange.state.secrets._patterns.clear()  # what a new coordinator process starts with
    await agent.log(job_id, attempt, 1, VALUE.encode() + b"\n")
    logs = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")
    assert base64.b64decode(logs.json()["chunks"][0]["data"]) == b"[redacted]\n"


async def _stored(exchange: Exchange, job_id: str, stream: str = "stdout") -> bytes:
    logs = await exchange.client.get(f"/api/v1/jobs/{job_id}/logs")
    return b"".join(base64.b64decode(c["data"]) for c in logs.json()["chunks"]
                    if c["stream"] == stream)


async def test_a_secret_split_between_chunks_is_redacted(live: Live,
                                                        agent_factory: Factory) -> None:
    """Each form split at each place, in chunks of one message each (so each is stored in a
    transaction of its own) and in one batch; the other stream and re-sent chunks too."""
    exchange = live.exchange
    await _set(exchange)
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent, project_secrets=["API_TOKEN"])
    cases = 0
    for form in _forms(VALUE):
        for cut in (1, len(form) // 2, len(form) - 1):
            first, second = b"a " + form[:cut], form[cut:] + b" b\n"
            await agent.log(job_id, attempt, agent.next_seq(job_id, attempt), first)
            await agent.log(job_id, attempt, agent.next_seq(job_id, attempt), second)
            cases += 1
    printed = VALUE.encode() + b"\n"
    chunks = [agent.log_chunk(job_id, attempt, agent.next_seq(job_id, attempt), printed[i:i + 1],
                              stream="stderr") for i in range(len(printed))]
    ids = [await agent.send(c, ack=False) for c in chunks]  # one batch, byte by byte
    await agent.wait_acked(*ids)
    await agent.send(chunks[-2])  # a re-sent chunk changes nothing
    stored = await _stored(exchange, job_id)
    assert stored.count(b"[redacted]") == cases == stored.count(b"\n"), stored
    for form in _forms(VALUE):
        assert form not in stored
    assert await _stored(exchange, job_id, "stderr") == b"[redacted]\n"


async def test_a_split_secret_is_redacted_after_a_coordinator_restart(
        live: Live, agent_factory: Factory) -> None:
    """The start of the value is read back from the database, not from memory."""
    exchange = live.exchange
    await _set(exchange)
    agent: FakeAgent = await agent_factory()
    job_id, attempt = await place_job(exchange, agent, project_secrets=["API_TOKEN"])
    await agent.log(job_id, attempt, 1, b"token: " + VALUE.encode()[:5])
    exchange.state.secrets._patterns.clear()  # what a new coordinator process starts with
    await agent.log(job_id, attempt, 2, VALUE.encode()[5:] + b"\n")
    assert await _stored(exchange, job_id) == b"token: [redacted]\n"
