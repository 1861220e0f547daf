"""A gang's logs on its job page (plain HTTP): a tab per rank and one for every rank (a menu for a
large gang), and the log feed of one member. The rows are written as the coordinator stores a
member's chunks (``rank``); the page is served without agents (``ui_site``)."""

from __future__ import annotations

import base64
import re

import pytest
from ui_site import Site

from bourse.server.db.schema import Attempt, LogChunk, MetricSample

pytestmark = pytest.mark.anyio


async def _signed_in(site: Site) -> None:
    assert (await site.login()).status_code == 303


async def _gang(site: Site, members: int) -> str:
    job = await site.submit(compute={"cpus": 1, "num_nodes": members})
    return str(job["id"])


async def _store(site: Site, job_id: str, writes: list[tuple[int, bytes]]) -> None:
    """Chunks of attempt 1, as members send them: (rank, bytes), in arrival order."""
    seqs: dict[int, int] = {}
    async with site.state.db.write() as session:
        for rank, data in writes:
            seq = seqs[rank] = seqs.get(rank, -1) + 1
            session.add(LogChunk(job_id=job_id, attempt=1, rank=rank, seq=seq, stream="stdout",
                                 offset=0, data=data, time=site.clock()))


def _tabs(html: str) -> list[tuple[str, str, bool]]:
    """(href, label, current) of each rank tab."""
    found = re.findall(r'<a href="(/ui/jobs/[^"]*#logs)"( aria-current="page")?>([^<]*)</a>', html)
    return [(href, label, bool(current)) for href, current, label in found]


async def test_a_gang_has_a_tab_per_rank_and_one_for_every_rank(site: Site) -> None:
    await _signed_in(site)
    job = await _gang(site, 3)
    base = f"/ui/jobs/{job}"
    every = (await site.client.get(base)).text
    assert _tabs(every) == [(f"{base}#logs", "All ranks", True),
                            (f"{base}?rank=0#logs", "Rank 0", False),
                            (f"{base}?rank=1#logs", "Rank 1", False),
                            (f"{base}?rank=2#logs", "Rank 2", False)]
    assert 'data-members="3" data-rank=""' in every
    one = await site.client.get(base, params={"rank": 1})
    assert one.status_code == 200
    assert [label for _, label, current in _tabs(one.text) if current] == ["Rank 1"]
    assert 'data-members="3" data-rank="1"' in one.text
    for bad in ("3", "x", "-1"):
        refused = await site.client.get(base, params={"rank": bad})
        assert refused.status_code == 422, bad


async def test_a_one_node_jobs_page_has_no_rank_tabs(site: Site) -> None:
    await _signed_in(site)
    job = await site.submit()
    page = (await site.client.get(f"/ui/jobs/{job['id']}")).text
    assert _tabs(page) == [] and 'class="ranks"' not in page
    assert 'data-members="1" data-rank=""' in page


async def test_a_large_gang_picks_its_member_from_a_menu(site: Site) -> None:
    await _signed_in(site)
    job = await _gang(site, 17)
    page = (await site.client.get(f"/ui/jobs/{job}", params={"rank": 16})).text
    assert _tabs(page) == []
    assert f'<form class="ranks" method="get" action="/ui/jobs/{job}#logs">' in page
    options = re.findall(r'<option value="(\d*)"( selected)?>', page)
    assert len(options) == 18 and options[0] == ("", "") and options[-1] == ("16", " selected")


async def test_the_log_feed_reads_every_member_or_one(site: Site) -> None:
    await _signed_in(site)
    job = await _gang(site, 2)
    await _store(site, job, [(0, b"zero\n"), (1, b"one\n"), (0, b"again\n")])
    feed = f"/ui/jobs/{job}/logs"
    every = (await site.client.get(feed)).json()
    assert [(c["rank"], base64.b64decode(c["data"])) for c in every["chunks"]] == [
        (0, b"zero\n"), (1, b"one\n"), (0, b"again\n")]
    one = (await site.client.get(feed, params={"rank": 1})).json()
    assert [(c["rank"], base64.b64decode(c["data"])) for c in one["chunks"]] == [(1, b"one\n")]
    assert one["cursor"] == every["cursor"]  # rank 0's later chunk is skipped, not re-read
    refused = await site.client.get(feed, params={"rank": 2})
    assert refused.status_code == 422
    assert refused.json()["error"].startswith(f"rank 2 is not a member of job {job}")


async def test_a_gangs_chart_shows_one_member_rank_0_unless_a_tab_says(site: Site) -> None:
    """Several members' samples on one chart would zigzag between nodes."""
    await _signed_in(site)
    job = await _gang(site, 2)
    async with site.state.db.write() as session:
        session.add_all([
            Attempt(job_id=job, number=1, rank=r, node_id=f"n{r}", state="RUNNING",
                    placed_at=0, start_deadline=0, resources={}) for r in (0, 1)])
        session.add_all([
            MetricSample(node_id=f"n{r}", job_id=job, attempt=1, time=site.clock() + r,
                         period_s=0.0, cpu_percent=10.0 * r + 5,
                         data={"cpu_percent": 10.0 * r + 5}) for r in (0, 1)])
    page = (await site.client.get(f"/ui/jobs/{job}", params={"rank": 1})).text
    assert f'data-metrics-url="/ui/jobs/{job}/metrics?rank=1"' in page
    default = (await site.client.get(f"/ui/jobs/{job}/metrics")).json()
    one = (await site.client.get(f"/ui/jobs/{job}/metrics", params={"rank": 1})).json()
    assert (default["cpu"], one["cpu"]) == ([5.0], [15.0])
