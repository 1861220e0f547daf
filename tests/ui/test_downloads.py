"""The job page's download links (``ui.links``, ``ui.downloads``): signed, short-lived, for the
job's project only, streamed from the exchange's store; and the pure parts as tables."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ui_site import Site, open_site

from bourse.core.errors import Forbidden
from bourse.protocol.api import LogChunkView
from bourse.server.dataplane import DataPlane
from bourse.server.db.schema import Job
from bourse.server.files import keys
from bourse.server.logs.archive import archive_key, as_text, encode
from bourse.server.ui import links
from bourse.server.ui.links import Kind
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings
from bourse.storage.memory import MemoryStores

pytestmark = pytest.mark.anyio
KEY = b"k" * 32
NOW = 1_700_000_000.0
MODEL = "s3://bourse/data/alpha/model.bin"
LINK = re.compile(r'href="(/ui/download/[A-Za-z0-9_.-]+)"')


# -- the token and the file name (pure) ------------------------------------------------------

def test_a_signed_grant_verifies_until_it_expires() -> None:
    made = links.grant(Kind.OBJECT, MODEL, "alpha", NOW)
    token = links.sign(KEY, made)
    assert links.verify(KEY, token, NOW + links.TTL_S - 1) == made
    with pytest.raises(Forbidden, match="expired"):
        links.verify(KEY, token, NOW + links.TTL_S)


def _forgeries(token: str) -> list[str]:
    body, _, mac = token.partition(".")
    other = links.grant(Kind.OBJECT, "s3://bourse/data/beta/", "alpha", NOW)
    longer = links.grant(Kind.OBJECT, MODEL, "alpha", NOW, ttl_s=10**6)
    return [
        links.sign(KEY, other).partition(".")[0] + "." + mac,  # another payload, this MAC
        links.sign(KEY, longer).partition(".")[0] + "." + mac,  # a later expiry
        body + "." + mac[:-1] + ("A" if mac[-1] != "A" else "B"),  # a changed MAC
        body, body + ".", "." + mac, "", "x.y",
        links.sign(b"o" * 32, links.grant(Kind.OBJECT, MODEL, "alpha", NOW)),  # another key
    ]


def test_a_tampered_or_forged_token_is_refused() -> None:
    token = links.sign(KEY, links.grant(Kind.OBJECT, MODEL, "alpha", NOW))
    for forged in _forgeries(token):
        with pytest.raises(Forbidden, match="not valid"):
            links.verify(KEY, forged, NOW)


@pytest.mark.parametrize(("key", "name"), [
    ("data/model.bin", "model.bin"),
    ("data/run 1/weights (final).pt", "weights_final_.pt"),
    ("a/\"; filename=evil.sh", "filename_evil.sh"),
    ("a/.hidden", "hidden"),
    ("a/..", "download"),
    ("a/b/", "b"),
    ("a/résumé.txt", "r_sum_.txt"),
])
def test_a_file_name_is_safe_to_put_in_a_header(key: str, name: str) -> None:
    assert links.safe_filename(key) == name


def _chunk(cursor: int, text: str, *, attempt: int = 1, rank: int = 0,
           stream: str = "stdout") -> LogChunkView:
    return LogChunkView(cursor=cursor, attempt=attempt, rank=rank, seq=cursor, stream=stream,
                        offset=0, data=base64.b64encode(text.encode()).decode())


@pytest.mark.parametrize(("chunks", "text"), [
    ([_chunk(2, "b\n"), _chunk(1, "a\n", stream="stderr")], "a\nb\n"),
    ([_chunk(1, "a"), _chunk(2, "b\n", attempt=2)], "a\n--- attempt 2 ---\nb\n"),
    ([_chunk(1, "r0\n"), _chunk(2, "r1\n", rank=1), _chunk(3, "r0 again\n")],
     "==> rank 0 <==\nr0\nr0 again\n==> rank 1 <==\nr1\n"),
    ([], ""),
])
def test_a_log_downloads_as_text(chunks: list[LogChunkView], text: str) -> None:
    assert as_text(chunks).decode() == text


# -- over HTTP, with a store -----------------------------------------------------------------

@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore("bourse")


@pytest.fixture
async def site(tmp_path: Path, store: MemoryStore) -> AsyncIterator[Site]:
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                      MemoryIssuer(), store=store, opener=MemoryStores(store))
    async with open_site(tmp_path, plane) as opened:
        yield opened


async def _member(site: Site, project: str) -> str:
    await site.api("POST", "/api/v1/projects", json={"name": project})
    made = await site.api("POST", "/api/v1/tokens", json={"project": project})
    token: str = made.json()["token"]
    return token


async def _finished_job(site: Site, store: MemoryStore, token: str) -> str:
    """Alpha's job as it is once it ran: its output uploaded, a checkpoint and the kept
    ``lightning_logs/`` in its prefix, its log archived in the store."""
    made = await site.client.post("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"},
                                  json={"command": ["true"], "outputs": {"model": MODEL}})
    assert made.status_code == 201, made.text
    job_id: str = made.json()["id"]
    kept = f"s3://bourse/jobs/{job_id}/lightning_logs/1/"
    await store.put("data/alpha/model.bin", b"weights\x00\x01")
    await store.put(f"jobs/{job_id}/checkpoints/last.ckpt", b"ckpt")
    await store.put(f"jobs/{job_id}/lightning_logs/1/version_0/metrics.csv", b"step,loss\n")
    await store.put(archive_key(job_id), encode([_chunk(1, "hello\n")]))
    async with site.state.db.write() as session:
        job = await session.get(Job, job_id)
        assert job is not None
        job.outputs, job.logs_archive = {"model": MODEL, "lightning_logs": kept}, archive_key(
            job_id)
    return job_id


async def _page_links(site: Site, job_id: str) -> list[str]:
    page = await site.client.get(f"/ui/jobs/{job_id}")
    assert page.status_code == 200, page.text
    return LINK.findall(page.text)


async def test_the_job_page_links_its_outputs_checkpoint_and_archived_log(
        site: Site, store: MemoryStore) -> None:
    alpha = await _member(site, "alpha")
    job_id = await _finished_job(site, store, alpha)
    await site.login(alpha)
    found = await _page_links(site, job_id)
    assert len(found) == 4  # the log (its section comes first), then the data table's rows
    log, model, lightning, checkpoints = [await site.client.get(u) for u in found]
    assert (model.status_code, model.content) == (200, b"weights\x00\x01")
    assert model.headers["content-disposition"] == 'attachment; filename="model.bin"'
    assert model.headers["content-type"] == "application/octet-stream"
    assert (log.text, log.headers["content-disposition"]) == (
        "hello\n", f'attachment; filename="{job_id}.log"')
    assert "version_0/metrics.csv" in lightning.text
    listed = LINK.findall(checkpoints.text)
    assert len(listed) == 1 and "checkpoints/last.ckpt" in checkpoints.text
    assert (await site.client.get(listed[0])).content == b"ckpt"


async def test_an_expired_or_tampered_link_is_refused(site: Site, store: MemoryStore) -> None:
    alpha = await _member(site, "alpha")
    await site.login(alpha)
    link = (await _page_links(site, await _finished_job(site, store, alpha)))[0]
    tampered = link[:-2] + ("AA" if link[-2:] != "AA" else "BB")
    assert (await site.client.get(tampered)).status_code == 403
    site.clock.now += links.TTL_S
    expired = await site.client.get(link)
    assert expired.status_code == 403 and "expired" in expired.text
    assert b"weights" not in expired.content


async def test_another_project_can_neither_see_nor_use_a_link(
        site: Site, store: MemoryStore) -> None:
    alpha, beta = await _member(site, "alpha"), await _member(site, "beta")
    job_id = await _finished_job(site, store, alpha)
    await site.login(alpha)
    alphas = await _page_links(site, job_id)
    await site.login(beta)
    assert (await site.client.get(f"/ui/jobs/{job_id}")).status_code == 404  # no page to link
    for link in alphas:
        response = await site.client.get(link)
        assert response.status_code == 404, link
        assert b"weights" not in response.content and b"hello" not in response.content
    # a link for beta's own project naming alpha's data (the key would have to leak for one
    # to exist): the data plane's rules refuse it when it is used
    key = keys.subkey(site.state.key, "ui-download")
    for kind, target in ((Kind.OBJECT, MODEL), (Kind.LOG, job_id),
                         (Kind.OBJECT, f"s3://bourse/jobs/{job_id}/checkpoints/last.ckpt")):
        beta_link = links.url(key, links.grant(kind, target, "beta", site.clock()))
        assert (await site.client.get(beta_link)).status_code == 404, target
