"""The metrics chart's feed and the nodes page's utilisation: the pure columns, and the feed
through the app (samples stored as the coordinator stores them)."""

from __future__ import annotations

import pytest
from ui_site import START, Site

from bourse.protocol.metrics import GpuSample, SampleView
from bourse.server.db.schema import MetricSample
from bourse.server.ui.charts import columns, usage

pytestmark = pytest.mark.anyio
GPU = GpuSample(index=0, utilization_percent=90.0, memory_used_mib=1000.0)


def test_columns_leave_gaps_for_missing_measures() -> None:
    samples = [SampleView(time=10.0, cpu_percent=50.0, memory_bytes=2**21,
                          gpus=[GPU, GPU.model_copy(update={"index": 1,
                                                            "utilization_percent": 70.0})]),
               SampleView(time=15.0)]
    assert columns(samples) == {"t": [10.0, 15.0], "cpu": [50.0, None], "gpu": [80.0, None],
                                "memory_mib": [2.0, None], "gpu_memory_mib": [2000.0, None]}


@pytest.mark.parametrize(("sample", "text"), [
    (None, "-"),
    (SampleView(time=1.0), "-"),
    (SampleView(time=1.0, cpu_percent=180.4, memory_bytes=3 * 2**30,
                memory_total_bytes=8 * 2**30, gpus=[GPU]),
     "CPU 180 % · memory 3.0 / 8.0 GiB · GPU 90 %"),
])
def test_usage(sample: SampleView | None, text: str) -> None:
    assert usage(sample) == text


async def test_the_feed_serves_the_job_s_samples_to_a_signed_in_browser(site: Site) -> None:
    job = await site.submit(name="charted")
    async with site.state.db.write() as session:
        for i in range(3):
            session.add(MetricSample(node_id="n1", job_id=job["id"], attempt=1,
                                     time=START + i, period_s=0.0, cpu_percent=10.0 * i,
                                     data={"cpu_percent": 10.0 * i, "memory_bytes": 2**20,
                                           "gpus": []}))
    url = f"/ui/jobs/{job['id']}/metrics"
    assert (await site.client.get(url)).status_code == 401
    await site.login()
    body = (await site.client.get(url)).json()
    assert body["t"] == [START, START + 1, START + 2] and body["cpu"] == [0.0, 10.0, 20.0]
    assert body["memory_mib"] == [1.0] * 3 and body["gpu"] == [None] * 3
    assert (body["stalled"], body["done"]) == (None, False)
    page = (await site.client.get(f"/ui/jobs/{job['id']}")).text
    assert 'id="metrics-charts"' in page and "uPlot-1.6.32.iife.min.js" in page
    assert (await site.client.get("/ui/jobs/j-none/metrics")).status_code == 404
