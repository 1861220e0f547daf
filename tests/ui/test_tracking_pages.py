"""The tracking pages in process (httpx ASGI, one exchange for the module): experiments, an
experiment's runs searched with MLflow's syntax (a bad filter shown beside the box), a run's
page and its downsampled curves, a job's run with its attempts' cost, and the comparison of
picked or searched runs with the params that differ flagged."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tracking_data import experiment, logged_run
from ui_site import Site, open_site

pytestmark = pytest.mark.anyio
LONG = 5000  # points of the long curve, charted as at most ``points``


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Tracked:
    site: Site
    experiment: str
    runs: dict[str, str]  # name -> run id


@pytest.fixture(scope="module")
async def tracked(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Tracked]:
    async with open_site(Path(tmp_path_factory.mktemp("tracking-ui"))) as site:
        sweep = await experiment(site.api, "lr-sweep")
        runs = {}
        for name, lr, loss in (("fast", "1e-2", 0.30), ("good", "1e-3", 0.15),
                               ("slow", "1e-4", 0.12)):
            runs[name] = await logged_run(site.api, sweep, name, {"lr": lr, "batch": "64"},
                                          {"val_loss": [1.0, 0.5, loss]}, tags={"owner": "ana"})
        runs["long"] = await logged_run(site.api, "0", "long", {"lr": "1e-3"},
                                        {"loss": [1.0 / (s + 1) for s in range(LONG)]})
        assert (await site.login()).status_code == 303
        yield Tracked(site, sweep, runs)


def _run_rows(html: str) -> list[str]:
    return re.findall(r'<tr data-run-id="([^"]+)"', html)


async def test_the_experiments_page_lists_default_and_named_ones(tracked: Tracked) -> None:
    page = await tracked.site.client.get("/ui/experiments")
    assert page.status_code == 200
    assert 'href="/ui/experiments/0">Default</a>' in page.text
    assert f'href="/ui/experiments/{tracked.experiment}">lr-sweep</a>' in page.text


async def test_an_experiments_runs_are_searched_with_mlflows_syntax(tracked: Tracked) -> None:
    url = f"/ui/experiments/{tracked.experiment}"
    everything = await tracked.site.client.get(url)
    assert set(_run_rows(everything.text)) == {tracked.runs[n] for n in ("fast", "good", "slow")}
    found = await tracked.site.client.get(url, params={
        "filter": 'metrics.val_loss < 0.2 and params.lr = "1e-3"'})
    assert _run_rows(found.text) == [tracked.runs["good"]]
    ordered = await tracked.site.client.get(url, params={"order": "metrics.val_loss ASC"})
    assert _run_rows(ordered.text) == [tracked.runs[n] for n in ("slow", "good", "fast")]
    bad = await tracked.site.client.get(url, params={"filter": "metrics.val_loss < 'low'"})
    assert bad.status_code == 422
    error = re.search(r'<p class="error search-error" role="alert">([^<]+)', bad.text)
    assert error is not None and "compares with a number" in error.group(1)
    assert "value=\"metrics.val_loss &lt; &#39;low&#39;\"" in bad.text  # kept in the box


async def test_a_runs_page_shows_params_tags_and_its_curves_downsampled(
        tracked: Tracked) -> None:
    run_id = tracked.runs["long"]
    page = await tracked.site.client.get(f"/ui/tracking/runs/{run_id}")
    assert page.status_code == 200
    assert f'data-curves-url="/ui/tracking/runs/{run_id}/curves"' in page.text
    assert "<td class=\"mono\">lr</td><td>1e-3</td>" in page.text
    assert "mlflow.runName" in page.text
    assert "system" not in re.findall(r'<section class="(\w+)"', page.text)  # not a job's
    curves = await tracked.site.client.get(f"/ui/tracking/runs/{run_id}/curves",
                                           params={"points": 100})
    [chart] = curves.json()["charts"]
    assert chart["key"] == "loss" and chart["total"] == LONG and chart["runs"] == ["long"]
    assert 3 <= len(chart["x"]) <= 100 and chart["x"][0] == 0 and chart["x"][-1] == LONG - 1
    assert all(1 / LONG <= v <= 1.0 for v in chart["y"][0])


async def test_a_jobs_run_shows_its_job_and_system_metrics(tracked: Tracked) -> None:
    job = await tracked.site.submit(name="tracked-job")
    page = await tracked.site.client.get(f"/ui/tracking/runs/{job['id']}")
    assert page.status_code == 200, page.text
    assert f'data-metrics-url="/ui/jobs/{job["id"]}/metrics"' in page.text
    assert f'<a class="mono" href="/ui/jobs/{job["id"]}">' in page.text
    job_page = await tracked.site.client.get(f"/ui/jobs/{job['id']}")
    assert f'href="/ui/tracking/runs/{job["id"]}"' in job_page.text


async def test_the_comparison_flags_the_params_that_differ(tracked: Tracked) -> None:
    picked = [tracked.runs[n] for n in ("fast", "good", "slow")]
    page = await tracked.site.client.get("/ui/tracking/compare", params={"run": picked})
    assert page.status_code == 200
    assert _run_rows(page.text) == picked
    headings = re.findall(r'<th class="param (\w+)"[^>]*>(\w+)</th>', page.text)
    assert headings == [("differs", "lr"), ("same", "batch")]  # the differing ones first
    assert '<b class="differs">lr</b>' in page.text
    url = re.search(r'data-curves-url="([^"]+)"', page.text)
    assert url is not None
    curves = await tracked.site.client.get(url.group(1).replace("&amp;", "&"))
    [chart] = curves.json()["charts"]
    assert chart["key"] == "val_loss" and chart["runs"] == ["fast", "good", "slow"]
    assert chart["x"] == [0, 1, 2] and [column[2] for column in chart["y"]] == [0.3, 0.15, 0.12]


async def test_the_comparison_of_a_search_and_its_errors(tracked: Tracked) -> None:
    found = await tracked.site.client.get("/ui/tracking/compare", params={
        "experiment": tracked.experiment, "filter": "params.lr != '1e-2'"})
    assert set(_run_rows(found.text)) == {tracked.runs["good"], tracked.runs["slow"]}
    bad = await tracked.site.client.get("/ui/tracking/compare", params={"filter": "lr = 1"})
    assert bad.status_code == 422 and 'class="error search-error"' in bad.text
    unknown = await tracked.site.client.get("/ui/tracking/compare", params={
        "run": [tracked.runs["good"], "no-such-run"]})
    assert unknown.status_code == 404 and "no-such-run" in unknown.text
    empty = await tracked.site.client.get("/ui/tracking/curves")
    assert empty.status_code == 422 and "?run=" in empty.json()["error"]
