"""``/api/v1/jobs`` through the ASGI app: submit, list, show, cancel, the timeline."""

from __future__ import annotations

import hashlib

import pytest
from server_harness import Exchange, job_spec

pytestmark = pytest.mark.anyio


async def test_submit_answers_the_pending_job_and_show_finds_it(exchange: Exchange) -> None:
    job = await exchange.submit(command=["python", "train.py"], name="train",
                                env={"SEED": "1"}, compute={"cpus": "2", "memory": "4GB"},
                                max_retries=1)
    assert job["id"].startswith("j-")
    assert (job["state"], job["attempt"], job["node_id"], job["name"]) == (
        "PENDING", 0, None, "train")
    assert job["created_at"] == job["updated_at"] == exchange.clock()
    spec = job["spec"]
    assert (spec["command"], spec["env"], spec["max_retries"]) == (
        ["python", "train.py"], {"SEED": "1"}, 1)
    assert spec["compute"]["cpus"]["min"] == 2 and spec["compute"]["memory"]["min"] == 4
    shown = await exchange.job(job["id"])
    assert shown == {**job, "attempts": [], "lost_work_s": None, "on_demand_cost": None}


async def test_list_is_newest_first_and_filters_by_state(exchange: Exchange) -> None:
    ids = []
    for _ in range(3):
        ids.append((await exchange.submit())["id"])
        exchange.clock.advance(1)
    await exchange.client.post(f"/api/v1/jobs/{ids[1]}/cancel")
    listed = (await exchange.client.get("/api/v1/jobs")).json()["jobs"]
    assert [j["id"] for j in listed] == ids[::-1]
    pending = (await exchange.client.get("/api/v1/jobs", params={"state": "PENDING"})).json()
    assert [j["id"] for j in pending["jobs"]] == [ids[2], ids[0]]
    cancelled = await exchange.client.get("/api/v1/jobs", params={"state": "CANCELLED"})
    assert [j["id"] for j in cancelled.json()["jobs"]] == [ids[1]]
    running = await exchange.client.get("/api/v1/jobs", params={"state": "RUNNING"})
    assert running.json()["jobs"] == []
    limited = await exchange.client.get("/api/v1/jobs", params={"limit": 2})
    assert [j["id"] for j in limited.json()["jobs"]] == [ids[2], ids[1]]


async def test_cancelling_a_pending_job_ends_it_at_once(exchange: Exchange) -> None:
    job = await exchange.submit()
    exchange.clock.advance(5)
    response = await exchange.client.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 200
    cancelled = response.json()
    assert cancelled["state"] == "CANCELLED"
    assert cancelled["updated_at"] == exchange.clock()
    assert "before it was placed" in cancelled["reason"]
    again = await exchange.client.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert (again.status_code, again.json()["state"]) == (200, "CANCELLED")
    states = [e["state"] for e in await exchange.events(job["id"]) if e["kind"] == "state"]
    assert states == ["PENDING", "CANCELLED"]
    report = await exchange.tick()
    assert report.placed == 0


async def test_the_timeline_pages_with_an_after_cursor(exchange: Exchange) -> None:
    job = await exchange.submit()
    await exchange.client.post(f"/api/v1/jobs/{job['id']}/cancel")
    events = await exchange.events(job["id"])
    assert [(e["kind"], e["state"], e["attempt"]) for e in events] == [
        ("state", "PENDING", 0), ("state", "CANCELLED", 0)]
    assert events[0]["message"] == "submitted"
    assert events[0]["id"] < events[1]["id"]
    after = await exchange.client.get(f"/api/v1/jobs/{job['id']}/events",
                                      params={"after": events[0]["id"]})
    assert [e["id"] for e in after.json()["events"]] == [events[1]["id"]]
    end = await exchange.client.get(f"/api/v1/jobs/{job['id']}/events",
                                    params={"after": events[1]["id"]})
    assert end.json()["events"] == []


async def test_timelines_belong_to_their_job(exchange: Exchange) -> None:
    first, second = await exchange.submit(), await exchange.submit()
    assert {e["job_id"] for e in await exchange.events(first["id"])} == {first["id"]}
    assert {e["job_id"] for e in await exchange.events(second["id"])} == {second["id"]}


@pytest.mark.parametrize("suffix", ["", "/events", "/logs", "/logs/follow", "/cancel"])
async def test_unknown_jobs_are_404(exchange: Exchange, suffix: str) -> None:
    method = "POST" if suffix == "/cancel" else "GET"
    response = await exchange.client.request(method, f"/api/v1/jobs/j-000000000000{suffix}")
    assert response.status_code == 404
    assert "j-000000000000" in response.json()["error"]


async def test_a_job_may_name_an_uploaded_bundle_only(exchange: Exchange) -> None:
    data = b"\x1f\x8b fake tarball"
    sha = hashlib.sha256(data).hexdigest()
    missing = await exchange.client.post("/api/v1/jobs", json=job_spec(bundle=sha))
    assert (missing.status_code, missing.json()["field"]) == (422, "bundle")
    assert (await exchange.client.put(f"/api/v1/bundles/{sha}", content=data)).status_code == 201
    job = await exchange.submit(bundle=sha)
    assert job["spec"]["bundle"] == sha


async def test_the_nodes_list_is_empty_before_any_enrolment(exchange: Exchange) -> None:
    response = await exchange.client.get("/api/v1/nodes")
    assert (response.status_code, response.json()) == (200, {"nodes": []})
    unknown = await exchange.client.get("/api/v1/nodes/n-000000000000")
    assert unknown.status_code == 404


async def _page(exchange: Exchange, **params: object) -> tuple[list[str], str | None]:
    response = await exchange.client.get("/api/v1/jobs", params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    return [j["id"] for j in body["jobs"]], body["next"]


async def test_pages_follow_each_other_by_cursor_with_none_missed_or_repeated(
        exchange: Exchange) -> None:
    ids = []
    for n in range(7):
        ids.append((await exchange.submit())["id"])
        if n % 3 == 2:  # some jobs share a creation time: the id orders them
            exchange.clock.advance(1)
    newest_first = [j["id"] for j in (await exchange.client.get("/api/v1/jobs")).json()["jobs"]]
    assert sorted(newest_first) == sorted(ids)
    seen, cursor, pages = [], None, 0
    while True:
        page, cursor = await _page(exchange, limit=3, **({"before": cursor} if cursor else {}))
        seen += page
        pages += 1
        if cursor is None:
            break
        assert cursor == page[-1]
    assert (seen, pages) == (newest_first, 3)
    assert await _page(exchange, limit=7) == (newest_first, None)
    assert await _page(exchange, limit=1, before=newest_first[-1]) == ([], None)


async def test_a_cursor_pages_within_the_state_asked(exchange: Exchange) -> None:
    ids = []
    for _ in range(4):
        ids.append((await exchange.submit())["id"])
        exchange.clock.advance(1)
    await exchange.client.post(f"/api/v1/jobs/{ids[2]}/cancel")
    first, cursor = await _page(exchange, state="PENDING", limit=2)
    assert (first, cursor) == ([ids[3], ids[1]], ids[1])
    assert await _page(exchange, state="PENDING", limit=2, before=cursor) == ([ids[0]], None)


@pytest.mark.parametrize(("before", "status", "says"), [
    ("j-nosuchjob", 404, "no such job to page from"),
    ("not a job/id", 422, "before"),
    ("x" * 65, 422, "before"),
])
async def test_a_bad_cursor_is_refused_saying_why(exchange: Exchange, before: str, status: int,
                                                  says: str) -> None:
    await exchange.submit()
    response = await exchange.client.get("/api/v1/jobs", params={"before": before})
    assert response.status_code == status
    assert says in response.text
