"""Why a job waits, on its page and in the jobs list: the matcher's explanation (its lines, as
placement stores them) as a table, a reason of one line as it is."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import update
from ui_site import Site

from bourse.core.compute import Compute
from bourse.core.match import explain
from bourse.core.offer import Offer
from bourse.server.db.schema import Job

pytestmark = pytest.mark.anyio

CPU_BOX = Offer(id="n-cpu", provider="node", instance_type="cpu-box", region="local", gpu=None,
                gpu_count=0, gpu_memory_mib=None, cpus=4, memory_gib=16, price=0.2,
                divisible=True, node_id="n-cpu", source="node")
EXPLANATION = explain(Compute("h100", cpus=8), [CPU_BOX], nearest=3)
EXPLAINED = "\n".join(EXPLANATION.lines())


async def _pending(site: Site, reason: str) -> str:
    job = await site.submit(name="waits")
    async with site.state.db.write() as session:
        await session.execute(update(Job).where(Job.id == job["id"]).values(
            pending_reason=reason))
    await site.login()
    return str(job["id"])


def _pending_block(page: str) -> str:
    body = page[page.index('id="job-pending"'):]
    return body[:body.index("</div>")]


def _lines(page: str) -> list[str]:
    """The lines of the reason shown as text."""
    return [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", _pending_block(page))]


def _cells(page: str) -> list[list[str]]:
    body = _pending_block(page)
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S) if "<td" in row]


async def test_the_job_page_draws_the_matchers_explanation_as_tables(site: Site) -> None:
    job_id = await _pending(site, EXPLAINED)
    page = (await site.client.get(f"/ui/jobs/{job_id}")).text
    assert page.count('<table class="grid reason">') == 2
    [miss] = EXPLANATION.nearest
    assert EXPLANATION.removed == (("gpu", 1),)
    assert _cells(page) == [["gpu", "1", "0"],
                            ["n-cpu", "; ".join(reason for _, reason in miss.lacks)]]
    assert _lines(page) == [EXPLAINED.splitlines()[0], EXPLAINED.splitlines()[1], "0 matched"]
    assert "<caption>nearest rejected offers:</caption>" in page
    header = (await site.client.get(f"/ui/jobs/{job_id}/header")).text  # what refreshes it
    assert header.count('<table class="grid reason">') == 2


async def test_the_jobs_list_shows_the_first_line_and_the_whole_reason_on_hover(
        site: Site) -> None:
    job_id = await _pending(site, EXPLAINED)
    rows = (await site.client.get("/ui/jobs/rows")).text
    row = rows[rows.index(f'data-job-id="{job_id}"'):]
    cell = re.search(r'<td class="note" title="([^"]*)">([^<]*)</td>', row)
    assert cell is not None
    assert html.unescape(cell.group(2)) == "1 offers considered for h100:1, cpus 8+"
    assert html.unescape(cell.group(1)) == EXPLAINED


async def test_a_reason_of_one_line_is_shown_as_it_is(site: Site) -> None:
    job_id = await _pending(site, "every connected node is busy")
    page = (await site.client.get(f"/ui/jobs/{job_id}")).text
    assert "<pre>every connected node is busy</pre>" in page
    assert 'class="grid reason"' not in page
