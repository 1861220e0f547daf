"""The services page: versions, and the charts of both versions' figures with the decisions
marked, drawn from the service's figures rows; nothing of another project's."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from ui_site import Site

from bourse.server.db.schema import ServiceRow
from bourse.server.services import serving as svc
from bourse.server.ui.services import chart

pytestmark = pytest.mark.anyio


async def test_the_page_charts_both_versions_and_marks_the_decision(site: Site) -> None:
    auth = {"Authorization": f"Bearer {site.admin_token}"}
    for version in ("1", "2"):
        made = await site.client.post("/api/v1/services", headers=auth, json={
            "name": "digits", "job": {"command": ["true"], "env": {"V": version}},
            "policy": {"port": 18000}})
        assert made.status_code == 200, made.text
    db = site.app.state.bourse.db
    async with db.write() as session:
        row = await session.scalar(select(ServiceRow))
        assert row is not None
        for t, bad in ((100.0, 0.0), (105.0, 0.2), (110.0, 0.25)):
            svc.add_service_event(session, row, t, "figures", "", data={
                "1": {"error_rate": 0.01, "p99_ms": 40.0, "requests": 90},
                "2": {"error_rate": bad, "p99_ms": 45.0, "requests": 10}})
        svc.add_service_event(session, row, 111.0, "decision",
                              "rolled back version 2: error rate 25.0% <b>", version=2)
    assert (await site.login()).status_code == 303
    page = (await site.client.get("/ui/services")).text
    assert page.count("<svg") == 2 and page.count("<polyline") == 4  # 2 charts x 2 versions
    assert 'stroke-dasharray="3,3"' in page  # the decision, marked
    assert "rolled back version 2: error rate 25.0% &lt;b&gt;" in page  # escaped
    assert "/svc/default/digits/" in page


def test_a_chart_without_traffic_says_so() -> None:
    assert "no traffic yet" in chart([], [], "p99_ms", "ms")
