"""The UI over plain HTTP (no browser): sign-in and its cookie, every endpoint's refusal without
it, CSRF on state changes, and what the pages and fragments say."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from ui_site import BASE_URL, Site, open_site

from bourse.protocol.api import OfferList, OfferView
from bourse.server.dataplane import DataPlane
from bourse.server.db.schema import Node
from bourse.server.http.cookie import COOKIE
from bourse.server.ui import fleet, routes
from bourse.server.ui.render import STATIC_DIR, VENDOR
from bourse.server.ui.session import csrf_token, safe_next
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings

pytestmark = pytest.mark.anyio
IDS = {"job_id": "j-missing", "node_id": "n-missing", "token": "not-a-token",
       "experiment_id": "e-missing", "run_id": "r-missing"}


def _url(path: str) -> str:
    return path.format(**IDS)


def _cookie_header(response: httpx.Response) -> str:
    found = [v for k, v in response.headers.multi_items() if k == "set-cookie"]
    assert len(found) == 1, found
    return found[0]


async def test_the_root_and_ui_root_redirect_to_the_jobs(site: Site) -> None:
    root = await site.client.get("/")
    assert (root.status_code, root.headers["location"]) == (307, "/ui/")
    home = await site.client.get("/ui/")
    assert (home.status_code, home.headers["location"]) == (307, "/ui/jobs")


@pytest.mark.parametrize(("path", "handler", "kind", "methods"), routes.GUARDED,
                         ids=[f"{m[0]} {p}" for p, _, _, m in routes.GUARDED])
async def test_every_ui_endpoint_needs_the_session_cookie(
        site: Site, path: str, handler: Any, kind: Any, methods: tuple[str, ...]) -> None:
    await site.client.get("/ui/jobs")  # no cookie: nothing to send
    for secret in (None, "bse_u_" + "x" * 43, site.admin_token):  # the bearer token is no cookie
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        response = await site.client.request(methods[0], _url(path), headers=headers)
        if kind is routes.Kind.PAGE:
            assert response.status_code == 303, (path, response.text)
            assert response.headers["location"].startswith("/ui/login")
        elif kind is routes.Kind.FRAGMENT:
            assert response.status_code == 401
            assert response.headers["hx-redirect"].startswith("/ui/login")
        else:
            assert (response.status_code, response.json()["hint"]) == (
                401, "sign in again at /ui/login")


async def test_a_page_remembers_where_it_was_going(site: Site) -> None:
    response = await site.client.get("/ui/jobs?state=RUNNING")
    assert response.headers["location"] == "/ui/login?next=%2Fui%2Fjobs%3Fstate%3DRUNNING"
    fragment = await site.client.get("/ui/jobs/rows", headers={
        "HX-Request": "true", "HX-Current-URL": f"{BASE_URL}/ui/nodes"})
    assert fragment.headers["hx-redirect"] == "/ui/login?next=%2Fui%2Fnodes"


async def test_sign_in_sets_a_strict_http_only_cookie_and_redirects(site: Site) -> None:
    response = await site.client.post("/ui/login", headers={"Origin": BASE_URL},
                                      data={"token": site.admin_token, "next": "/ui/nodes"})
    assert (response.status_code, response.headers["location"]) == (303, "/ui/nodes")
    cookie = _cookie_header(response).lower()
    assert cookie.startswith(f"{COOKIE}=")
    for flag in ("httponly", "samesite=strict", "path=/;", "max-age=43200"):
        assert flag in cookie
    assert "secure" not in cookie  # plain http: a Secure cookie would never come back
    page = await site.client.get("/ui/nodes")
    assert page.status_code == 200
    assert site.admin_token not in page.text


async def test_over_https_the_cookie_is_secure_and_ends_with_the_token(site: Site) -> None:
    token = await site.user_token(expires_at=site.clock() + 600)
    transport = httpx.ASGITransport(app=site.app)
    async with httpx.AsyncClient(transport=transport, base_url="https://bourse.test") as client:
        response = await client.post("/ui/login", data={"token": token},
                                     headers={"Origin": "https://bourse.test"})
    cookie = _cookie_header(response).lower()
    assert "; secure" in cookie
    assert "max-age=600" in cookie


@pytest.mark.parametrize("secret", ["", "bse_u_" + "x" * 43, "node", "expired"])
async def test_a_bad_token_is_refused_without_a_cookie(site: Site, secret: str) -> None:
    if secret == "node":
        made = await site.api("POST", "/api/v1/enrollments", json={})
        enrolled = await site.client.post("/api/v1/agent/enroll", json={"name": "n1"}, headers={
            "Authorization": f"Bearer {made.json()['token']}"})
        secret = enrolled.json()["credential"]
    elif secret == "expired":
        secret = await site.user_token(expires_at=site.clock())
    response = await site.login(secret or " ")
    assert response.status_code == 401
    assert "set-cookie" not in response.headers
    assert "token" in response.text
    if secret:
        assert secret not in response.text


async def test_a_sign_in_link_works_from_a_terminal_but_not_from_another_site(
        site: Site) -> None:
    cross = await site.client.get("/ui/login", params={"token": site.admin_token},
                                  headers={"Sec-Fetch-Site": "cross-site"})
    assert (cross.status_code, cross.headers["location"]) == (
        303, "/ui/login?refused=cross-site")
    assert "set-cookie" not in cross.headers
    form = await site.client.get(cross.headers["location"])
    assert "came from another site" in form.text
    typed = await site.client.get("/ui/login", params={"token": site.admin_token,
                                                       "next": "/ui/runs"},
                                  headers={"Sec-Fetch-Site": "none"})
    assert (typed.status_code, typed.headers["location"]) == (303, "/ui/runs")
    assert COOKIE in _cookie_header(typed)
    assert (await site.client.get("/ui/runs")).status_code == 200


async def test_a_cross_site_sign_in_post_is_refused(site: Site) -> None:
    response = await site.client.post("/ui/login", data={"token": site.admin_token},
                                      headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize(("target", "expected"), [
    (None, "/ui/jobs"), ("", "/ui/jobs"), ("/ui/nodes", "/ui/nodes"),
    ("/ui/jobs/j_1?x=1", "/ui/jobs/j_1?x=1"), ("https://evil.example/ui/", "/ui/jobs"),
    ("//evil.example/ui/", "/ui/jobs"), ("/ui\\@evil.example", "/ui/jobs"),
    ("/api/v1/jobs", "/ui/jobs"), ("/ui/login?next=/ui/x", "/ui/jobs"),
    ("javascript:x", "/ui/jobs"),
])
def test_after_sign_in_only_ui_paths_are_followed(target: str | None, expected: str) -> None:
    assert safe_next(target) == expected


async def test_the_api_takes_no_cookie(site: Site) -> None:
    await site.login()
    response = await site.client.get("/api/v1/jobs")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


async def test_a_revoked_or_expired_token_ends_the_session(site: Site) -> None:
    token = await site.user_token(expires_at=site.clock() + 60)
    assert (await site.login(token)).status_code == 303
    assert (await site.client.get("/ui/jobs")).status_code == 200
    site.clock.now += 60
    response = await site.client.get("/ui/jobs")
    assert response.status_code == 303
    assert response.headers["location"].startswith("/ui/login")


async def _signed_in(site: Site) -> str:
    response = await site.login()
    assert response.status_code == 303, response.text
    return csrf_token(site.admin_token)


async def test_pages_carry_a_strict_content_security_policy(site: Site) -> None:
    await _signed_in(site)
    for path in ("/ui/jobs", "/ui/nodes", "/ui/offers", "/ui/runs", "/ui/login"):
        response = await site.client.get(path)
        assert response.status_code == 200, path
        csp = response.headers["content-security-policy"]
        assert "script-src 'self';" in csp
        assert "frame-ancestors 'none'" in csp
        assert response.headers["x-frame-options"] == "DENY"
        assert "<script>" not in response.text  # no inline script: the policy forbids it


async def test_the_jobs_list_filters_by_state_and_searches_names_and_ids(site: Site) -> None:
    await _signed_in(site)
    train = await site.submit(name="r-1/train")
    other = await site.submit(name="sweep 100%")
    await site.api("POST", f"/api/v1/jobs/{other['id']}/cancel")
    page = await site.client.get("/ui/jobs")
    assert train["id"] in page.text
    assert other["id"] in page.text
    rows = await site.client.get("/ui/jobs/rows", params={"state": "CANCELLED"})
    assert other["id"] in rows.text
    assert train["id"] not in rows.text
    for text, found in [("TRAIN", train), (train["id"][-6:], train), ("100%", other)]:
        rows = await site.client.get("/ui/jobs/rows", params={"q": text})
        ids = set(re.findall(r'data-job-id="([^"]+)"', rows.text))
        assert ids == {found["id"]}, text
    none = await site.client.get("/ui/jobs/rows", params={"q": "_"})  # LIKE's wildcard, escaped
    assert "No jobs match" in none.text


async def test_the_job_page_shows_its_state_timeline_data_and_a_cancel_button(
        site: Site) -> None:
    csrf = await _signed_in(site)
    job = await site.submit(name="prep", inputs={}, env={"SECRET_KEY": "hunter2"})
    page = await site.client.get(f"/ui/jobs/{job['id']}")
    assert page.status_code == 200
    text = page.text
    assert 'id="job-state">PENDING' in text
    assert "Submitted" in text and "submitted" in text  # the timeline's first phase and event
    assert 'id="cancel-job"' in text
    assert csrf in text
    assert "SECRET_KEY" in text and "hunter2" not in text  # env names, never values
    assert site.admin_token not in text
    header = await site.client.get(f"/ui/jobs/{job['id']}/header")
    assert 'hx-trigger="every 2s"' in header.text


async def test_cancel_needs_the_csrf_token_and_the_same_origin(site: Site) -> None:
    csrf = await _signed_in(site)
    job = await site.submit()
    url = f"/ui/jobs/{job['id']}/cancel"
    refused = [
        await site.client.post(url, headers={"HX-Request": "true"}),
        await site.client.post(url, headers={"X-CSRF-Token": "0" * 32}),
        await site.client.post(url, headers={"X-CSRF-Token": csrf,
                                             "Origin": "https://evil.example"}),
        await site.client.post(url, data={"csrf": csrf}, headers={"Sec-Fetch-Site": "cross-site"}),
    ]
    assert [r.status_code for r in refused] == [403] * 4
    job_now = (await site.api("GET", f"/api/v1/jobs/{job['id']}")).json()
    assert job_now["state"] == "PENDING"
    done = await site.client.post(url, headers={"X-CSRF-Token": csrf, "Origin": BASE_URL,
                                                "HX-Request": "true"})
    assert done.status_code == 200
    assert 'id="job-state">CANCELLED' in done.text
    assert "every 2s" not in done.text  # an ended job's header stops polling


async def test_a_plain_form_cancel_redirects_back_to_the_job(site: Site) -> None:
    csrf = await _signed_in(site)
    job = await site.submit()
    response = await site.client.post(f"/ui/jobs/{job['id']}/cancel", data={"csrf": csrf},
                                      headers={"Origin": BASE_URL})
    assert (response.status_code, response.headers["location"]) == (
        303, f"/ui/jobs/{job['id']}")


async def test_the_log_feed_is_the_api_log_page_with_a_more_flag(site: Site) -> None:
    await _signed_in(site)
    job = await site.submit()
    live = await site.client.get(f"/ui/jobs/{job['id']}/logs", params={"after": 0})
    assert live.json() == {"chunks": [], "cursor": 0, "done": False, "pruned": False,
                           "more": False}
    await site.api("POST", f"/api/v1/jobs/{job['id']}/cancel")
    ended = await site.client.get(f"/ui/jobs/{job['id']}/logs", params={"wait": 1})
    assert ended.json()["done"] is True  # an ended job answers at once, even asked to wait
    bad = await site.client.get(f"/ui/jobs/{job['id']}/logs", params={"after": "-1"})
    assert bad.status_code == 422
    missing = await site.client.get("/ui/jobs/j-nope/logs")
    assert (missing.status_code, missing.json()["error"]) == (404, "no job 'j-nope'")


async def test_a_missing_job_or_node_is_a_404_page(site: Site) -> None:
    await _signed_in(site)
    for path in ("/ui/jobs/j-nope", "/ui/nodes/n-nope", "/ui/jobs/bad%20id"):
        response = await site.client.get(path)
        assert response.status_code == 404, path
        assert "Back to the jobs" in response.text


async def test_the_offers_page_explains_why_nothing_matches(site: Site) -> None:
    await _signed_in(site)
    response = await site.client.get("/ui/offers", params={"gpu": "h100", "cpus": "4"})
    assert response.status_code == 200
    assert "Why nothing matches" in response.text
    assert "0 offers considered for h100" in response.text
    bad = await site.client.get("/ui/offers", params={"gpu": "notagpu"})
    assert bad.status_code == 422
    assert "unknown GPU" in bad.text


async def test_the_offers_page_shows_each_live_offers_measured_reliability(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    await _signed_in(site)

    def offer(node_id: str, sla: float | None) -> OfferView:
        return OfferView(id=f"o-{node_id}", provider="exchange", instance_type=node_id,
                         node_id=node_id, region="local", gpu_count=0, cpus=4,
                         price_per_hour=0.5, spot=False, sla=sla)

    async def matched(*_: Any) -> OfferList:
        return OfferList(offers=[offer("n-steady", 0.9912), offer("n-young", None)])

    monkeypatch.setattr(fleet.api_offers, "match_offers", matched)
    page = (await site.client.get("/ui/offers", params={"cpus": "4"})).text
    assert "<th" in page and ">Reliability</th>" in page
    cells = re.findall(r'<td class="reliability">([^<]*)</td>', page)
    assert cells == ["99.1%", "-"]  # an unmeasured node's offer has none


async def test_the_runs_page_groups_stages_by_run(site: Site) -> None:
    await _signed_in(site)
    for run, stage in (("r-xyz", "prepare"), ("r-xyz", "train"), ("r-abc", "prepare")):
        site.clock.now += 1
        await site.submit(name=f"{run}/{stage}", run=run, stage=stage, app="app.py")
    for name in ("plain", "r-no/stage"):
        await site.submit(name=name)
    page = (await site.client.get("/ui/runs")).text
    assert page.index('data-run-id="r-abc"') < page.index('data-run-id="r-xyz"')  # newest first
    xyz = page[page.index('data-run-id="r-xyz"'):]
    assert xyz.index("prepare") < xyz.index("train")
    assert "plain" not in page and "r-no" not in page  # named like a stage, of no run


async def test_a_runs_driver_heads_the_run_and_runs_are_found_by_app(site: Site) -> None:
    await _signed_in(site)
    for run, app, stage in (("r-dig", "digits.py", None), ("r-dig", "digits.py", "prepare"),
                            ("r-llm", "finetune.py", "train")):
        site.clock.now += 1
        await site.submit(name=f"{run}/{stage or 'driver'}", run=run, app=app, stage=stage)
    page = (await site.client.get("/ui/runs")).text
    digits = page[page.index('data-run-id="r-dig"'):]
    assert re.findall(r'data-stage="([\w-]+)"', digits) == ["prepare"]  # not the driver
    assert "Driven by job" in digits and "digits.py" in digits
    for path in ("/ui/runs", "/ui/runs/list"):
        found = (await site.client.get(path, params={"app": "DIGITS"})).text
        assert re.findall(r'data-run-id="([\w-]+)"', found) == ["r-dig"], path
    none = (await site.client.get("/ui/runs/list", params={"app": "whisper"})).text
    assert "No runs of an app named like" in none
    assert 'name="app" value="fine"' in (await site.client.get("/ui/runs?app=fine")).text


async def test_the_runs_page_draws_a_runs_stages_as_a_graph(tmp_path: Path) -> None:
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                      MemoryIssuer(), store=MemoryStore("bourse"))
    async with open_site(tmp_path, plane) as site:
        await _signed_in(site)
        out = "s3://bourse/runs/r-fan/{}/out/"
        for name, reads in (("prepare", ()), ("left", ("prepare",)), ("right", ("prepare",)),
                            ("merge", ("left", "right"))):
            site.clock.now += 1
            await site.submit(name=f"r-fan/{name}", run="r-fan", stage=name,
                              inputs={f"in_{r}": out.format(r) for r in reads},
                              outputs={"out": out.format(name)})
        pages = {path: (await site.client.get(path)).text
                 for path in ("/ui/runs", "/ui/runs/list")}  # the page, and what refreshes it
        for path, page in pages.items():
            edges = re.findall(r'class="edge"[^>]*data-source="(\w+)" data-target="(\w+)"', page)
            assert edges == [("prepare", "left"), ("prepare", "right"), ("left", "merge"),
                             ("right", "merge")], path
            layers = dict(re.findall(r'data-stage="(\w+)" data-layer="(\d)"', page))
            assert layers == {"prepare": "0", "left": "1", "right": "1", "merge": "2"}
            assert "not placed" in page
        assert 'hx-get="/ui/runs/list"' in pages["/ui/runs"]


async def test_the_nodes_page_lists_enrolled_nodes(site: Site) -> None:
    await _signed_in(site)
    assert "No nodes enrolled" in (await site.client.get("/ui/nodes")).text
    made = await site.api("POST", "/api/v1/enrollments", json={})
    await site.client.post("/api/v1/agent/enroll", json={"name": "gpu-box"},
                           headers={"Authorization": f"Bearer {made.json()['token']}"})
    rows = await site.client.get("/ui/nodes/rows")
    assert "gpu-box" in rows.text
    assert "unverified" in rows.text


async def _enrol(site: Site, name: str) -> str:
    made = await site.api("POST", "/api/v1/enrollments", json={})
    answer = await site.client.post("/api/v1/agent/enroll", json={"name": name},
                                    headers={"Authorization": f"Bearer {made.json()['token']}"})
    assert answer.status_code in (200, 201), answer.text
    node_id: str = answer.json()["node_id"]
    return node_id


async def test_the_nodes_pages_show_each_nodes_measured_reliability(site: Site) -> None:
    await _signed_in(site)
    steady = await _enrol(site, "steady-box")
    site.clock.now += 2 * 86400
    young = await _enrol(site, "young-box")
    async with site.state.db.write() as session:  # the record the coordinator would have kept
        await session.execute(update(Node).where(Node.id == steady).values(
            up_s=0.95 * 2 * 86400, attempts_ended=20, attempts_interrupted=1, work_s=30 * 3600))
    site.clock.now += 600
    rows = (await site.client.get("/ui/nodes/rows")).text
    row = rows[rows.index(f'data-node-id="{steady}"'):rows.index(f'data-node-id="{young}"')]
    # 95% of 2 days connected of 2 days 10 min watched, 19 of 20 attempts kept
    assert ">89.9%<" in row
    assert 'title="94.7% available over 2.0 d; 1 of 20 attempts interrupted' in row
    assert "not measured yet" in rows[rows.index(f'data-node-id="{young}"'):]
    listing = (await site.client.get("/ui/nodes")).text
    assert "<th>Reliability</th>" in listing
    by_provider = listing[listing.index("<h2>By provider</h2>"):]
    row = by_provider[by_provider.index('data-provider="node"'):]
    row = row[:row.index("</tr>")]
    # both nodes together: 95% of 2 days connected, of 2 days 20 min watched; 1 of 20 lost
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    assert cells == ["node", "2", "2.0 d", "94.3%", "1 of 20", "89.6%", "-"], cells
    page = (await site.client.get(f"/ui/nodes/{steady}")).text
    section = page[page.index("<h2>Reliability</h2>"):page.index("<h2>Current jobs</h2>")]
    for figure in ("89.9%", "94.7% of 2.0 d connected", "20 ended, 1 interrupted", "30.0 h",
                   "0.03 interruptions per hour", "2023-11-14 22:13:20 UTC"):
        assert figure in section, figure
    young_page = (await site.client.get(f"/ui/nodes/{young}")).text
    assert ("Not measured yet: the exchange measures a node&#39;s reliability once it has "
            "watched it for an hour (watched 10 min so far).") in young_page


async def test_sign_out_needs_csrf_and_clears_the_cookie(site: Site) -> None:
    csrf = await _signed_in(site)
    refused = await site.client.post("/ui/logout", headers={"Origin": BASE_URL})
    assert refused.status_code == 403
    response = await site.client.post("/ui/logout", data={"csrf": csrf},
                                      headers={"Origin": BASE_URL})
    assert (response.status_code, response.headers["location"]) == (303, "/ui/login")
    assert 'max-age=0' in _cookie_header(response).lower()
    assert (await site.client.get("/ui/jobs")).status_code == 303


async def test_static_assets_are_public_and_vendored(site: Site) -> None:
    for name in (*VENDOR.values(), "ui.css", "logs.js", "login.js"):
        assert (STATIC_DIR / name).is_file(), name
        response = await site.client.get(f"/ui/static/{name}")
        assert response.status_code == 200, name
    assert (await site.client.get("/ui/static/../session.py")).status_code == 404


async def test_the_ui_is_not_part_of_the_api_document(site: Site) -> None:
    spec = (await site.client.get("/openapi.json")).json()
    assert not [path for path in spec["paths"] if path == "/" or path.startswith("/ui")]
