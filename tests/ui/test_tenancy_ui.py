"""The web UI shows a project only its own jobs and nodes: every guarded endpoint, signed in
as another project, answers alpha's ids as missing and shows nothing of alpha's."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tracking_data import experiment, logged_run
from ui_site import BASE_URL, Site

from bourse.server.files import keys
from bourse.server.ui import links, routes
from bourse.server.ui.session import csrf_token

pytestmark = pytest.mark.anyio
SEARCHES = {"/ui/tracking/compare", "/ui/tracking/curves"}


async def _token(site: Site, project: str) -> str:
    await site.api("POST", "/api/v1/projects", json={"name": project})
    made = await site.api("POST", "/api/v1/tokens", json={"project": project})
    token: str = made.json()["token"]
    return token


async def test_another_projects_session_sees_nothing_of_alpha(site: Site) -> None:
    alpha = {"Authorization": f"Bearer {await _token(site, 'alpha-corp')}"}
    job = await site.client.post("/api/v1/jobs", headers=alpha, json={
        "command": ["true"], "name": "alpha-job-name-91c"})
    provider = await site.api("POST", "/api/v1/tokens", json={"project": "alpha-corp",
                                                              "role": "provider"})
    enrolment = await site.client.post("/api/v1/enrollments", json={}, headers={
        "Authorization": f"Bearer {provider.json()['token']}"})
    node = await site.client.post("/api/v1/agent/enroll", json={"name": "alpha-node-7f3"},
                                  headers={"Authorization": f"Bearer "
                                                            f"{enrolment.json()['token']}"})
    ids = {"job_id": job.json()["id"], "node_id": node.json()["node_id"]}

    async def as_alpha(method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await site.client.request(method, url, headers=alpha, **kwargs)

    ids["experiment_id"] = await experiment(as_alpha, "alpha-experiment-3d1")
    ids["run_id"] = await logged_run(as_alpha, ids["experiment_id"], "alpha-run-name-5e2",
                                     {"alpha-param-8c0": "1"}, {"alpha-metric-2b7": [1.0]})
    log = links.grant(links.Kind.LOG, ids["job_id"], "alpha-corp", site.clock())
    ids["token"] = links.sign(keys.subkey(site.state.key, "ui-download"), log)  # alpha's link
    markers = {*ids.values(), "alpha-job-name-91c", "alpha-node-7f3", "alpha-experiment-3d1",
               "alpha-run-name-5e2", "alpha-param-8c0", "alpha-metric-2b7"}
    markers.discard(ids["experiment_id"])  # a number like "1": beta's ids may show it
    beta = await _token(site, "beta-labs")
    assert (await site.login(beta)).status_code == 303
    for path, _, _, methods in routes.GUARDED:
        if path == "/ui/logout":
            continue
        url = path.format(**ids)
        if path in SEARCHES:  # the pages that take runs in the query
            url += f"?run={ids['run_id']}&key=alpha-metric-2b7"
        headers = {"Origin": BASE_URL, "X-CSRF-Token": csrf_token(beta)}
        response = await site.client.request(methods[0], url, headers=headers)
        where = (path, response.status_code)
        leaked = {m for m in markers if m in response.text and m not in url}
        assert not leaked, where
        if "{" in path or path in SEARCHES:
            assert response.status_code == 404, where
    alpha_view = await site.client.get(f"/api/v1/jobs/{ids['job_id']}", headers=alpha)
    assert alpha_view.json()["state"] == "PENDING"  # beta's cancel did not reach it
