"""The gradient flow page of a job's run: the heat map's cells, the flagged layers, the model
graph; a run with nothing logged says how to log."""

from __future__ import annotations

import json

import pytest
from ui_site import Site

from bourse.core.gradflow import flag
from bourse.server.access import Scope
from bourse.server.services.tracking import Writer
from bourse.server.services.tracking_log import Point, log_batch
from bourse.server.ui.gradients import colour

pytestmark = pytest.mark.anyio


def test_colours_run_blue_to_red_on_a_log_scale() -> None:
    assert colour(1e-3, 1e-3, 1e3) == "hsl(240, 70%, 50%)"
    assert colour(1.0, 1e-3, 1e3) == "hsl(120, 70%, 50%)"
    assert colour(1e6, 1e-3, 1e3) == "hsl(0, 70%, 50%)" and flag(1e6) == "exploding"


async def test_the_page_draws_the_norms_flags_and_graph(site: Site) -> None:
    job = (await site.api("POST", "/api/v1/jobs", json={"command": ["true"]})).json()
    assert (await site.login()).status_code == 303
    empty = await site.client.get(f"/ui/jobs/{job['id']}/gradients")
    graph = {"tree": {"name": "", "type": "Net", "params": 0, "total": 12, "shapes": {},
                      "children": [{"name": "enc", "type": "Linear", "params": 12,
                                    "total": 12, "shapes": {"weight": [3, 4]},
                                    "children": []}]}, "ops": None, "cut": False}
    async with site.state.db.write() as session:
        await log_batch(session, Writer("default", Scope(None)), job["id"], metrics=[
            Point(f"grad_norm/{layer}", v, 1000 + s, s) for s in range(4)
            for layer, v in (("enc", 0.5), ("dec", 1e-9))],
            params={}, tags={"bourse.model_graph": json.dumps(graph)}, now=1.0)
    response = await site.client.get(f"/ui/jobs/{job['id']}/gradients")
    assert response.status_code == 200, response.text
    text = response.text
    assert text.count("<rect ") == 8 and "enc @ step 3: 0.5" in text
    assert "<span class=\"mono\">dec</span> <span class=\"tag\">vanishing</span>" in text
    assert "weight 3×4" in text and "12 params" in text
    assert empty.status_code == 200 and "No gradient norms logged" in empty.text
