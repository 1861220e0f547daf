"""A tracked run's artifacts on its page (``ui.artifacts``) and their signed links (ARTIFACT,
served by ``ui.downloads``): logged through the MLflow artifact routes as alpha, listed on
alpha's run page, downloaded byte for byte; nothing of them for beta, for a forged, tampered
or expired link, or for a path that leaves the run; names escaped; and the pure parts."""

from __future__ import annotations

import asyncio
import html
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import uvicorn
from tracking_data import mlflow
from ui_site import Site, open_site

from bourse.core.errors import InvalidInput
from bourse.server.dataplane import DataPlane
from bourse.server.ui import artifacts, links
from bourse.server.ui.links import Kind
from bourse.storage import MemoryIssuer, MemoryStore, StoreSettings
from bourse.storage.errors import StoreUnavailable
from bourse.storage.memory import MemoryStores

pytestmark = pytest.mark.anyio
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"
ROW = re.compile(r'<tr class="artifact"><td class="mono">(?:<a href="(/ui/download/'
                 r'[A-Za-z0-9_.-]+)" download>)?([^<]*)')
FILES = {  # relative path -> bytes, as a script's mlflow.log_artifact(s) leaves them
    "notes.txt": b"hello from the run\n",
    "model/weights.bin": bytes(range(256)) * 40,
    "eval/plots/loss.csv": b"step,loss\n0,1.0\n1,0.5\n",
}
SCRIPT = """
import pathlib, sys, mlflow
out = pathlib.Path("out")
for path, data in FILES.items():
    (out / path).parent.mkdir(parents=True, exist_ok=True)
    (out / path).write_bytes(data)
with mlflow.start_run(run_name="artifacts") as run:
    mlflow.log_artifact(str(out / "notes.txt"))
    mlflow.log_artifacts(str(out / "model"), artifact_path="model")
    mlflow.log_artifacts(str(out / "eval"), artifact_path="eval")
print(run.info.run_id)
"""


# -- the pure parts --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "media"), [
    ("notes.txt", "text/plain; charset=utf-8"), ("loss.CSV", "text/plain; charset=utf-8"),
    ("config.yaml", "text/plain; charset=utf-8"), ("weights.bin", "application/octet-stream"),
    ("page.html", "application/octet-stream"), ("plot.svg", "application/octet-stream"),
    ("README", "application/octet-stream"), ("archive.tar.gz", "application/octet-stream"),
])
def test_only_an_obviously_text_file_is_served_as_text(name: str, media: str) -> None:
    assert links.media_type(name) == media


@pytest.mark.parametrize(("size", "text"), [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (5 * 1024**3, "5.0 GiB"), (3 * 1024**5, "3072.0 TiB"),
])
def test_a_size_reads_as_a_person_reads_it(size: int, text: str) -> None:
    assert artifacts.size_text(size) == text


@pytest.mark.parametrize(("run_id", "relative"), [
    ("r1", "../r2/secret.txt"), ("r1", "a/../../r2/x"), ("r1", "./a"), ("r1", "a//b"),
    ("r1", ""), ("r1", "a/"), ("..", "x"), (".", "x"), ("", "x"), ("r1/../r2", "x"),
])
def test_a_link_leaving_the_runs_place_cannot_be_made(run_id: str, relative: str) -> None:
    with pytest.raises(InvalidInput):
        links.artifact_target(run_id, relative)


@pytest.mark.parametrize("target", ["r1/../r2/x", "r1", "r1/", "../x", "r1/a/./b"])
def test_a_target_leaving_the_runs_place_is_not_read(target: str) -> None:
    with pytest.raises(InvalidInput):
        links.artifact_of(target)


def test_a_target_names_its_run_and_nested_path() -> None:
    target = links.artifact_target("r1", "eval/plots/loss.csv")
    assert links.artifact_of(target) == ("r1", "eval/plots/loss.csv")


# -- over HTTP, with a store -----------------------------------------------------------------

@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore("bourse")


@pytest.fixture
async def stored(tmp_path: Path, store: MemoryStore) -> AsyncIterator[Site]:
    plane = DataPlane(StoreSettings(endpoint="http://store.test:8333"), "bourse",
                      MemoryIssuer(), store=store, opener=MemoryStores(store))
    async with open_site(tmp_path, plane) as opened:
        yield opened


async def _member(site: Site, project: str) -> dict[str, str]:
    await site.api("POST", "/api/v1/projects", json={"name": project})
    made = await site.api("POST", "/api/v1/tokens", json={"project": project})
    return {"Authorization": f"Bearer {made.json()['token']}"}


async def _run(site: Site, member: dict[str, str], files: dict[str, bytes]) -> str:
    """A run of the member's default experiment with ``files`` uploaded as MLflow's client
    uploads them (PUT to the artifact routes)."""
    async def as_member(method: str, url: str, **kwargs: Any) -> httpx.Response:
        return await site.client.request(method, url, headers=member, **kwargs)

    made = await mlflow(as_member, "runs/create", {"experiment_id": "0", "run_name": "r"})
    run_id: str = made["run"]["info"]["run_id"]
    for path, data in files.items():
        put = await site.client.put(f"{ARTIFACTS}/0/{run_id}/artifacts/{quote(path)}",
                                    content=data, headers=member)
        assert put.status_code == 200, put.text
    return run_id


async def _rows(site: Site, run_id: str) -> dict[str, str]:
    """The run page's artifacts: path -> link ("" for a row without one)."""
    page = await site.client.get(f"/ui/tracking/runs/{run_id}")
    assert page.status_code == 200, page.text
    return {html.unescape(path): link for link, path in ROW.findall(page.text)}


async def test_a_runs_page_lists_its_artifacts_and_each_link_downloads_the_bytes(
        stored: Site) -> None:
    alpha = await _member(stored, "alpha")
    run_id = await _run(stored, alpha, FILES)
    await stored.login(alpha["Authorization"].removeprefix("Bearer "))
    page = await stored.client.get(f"/ui/tracking/runs/{run_id}")
    assert "3 files, 10.0 KiB" in page.text and "UTC" in page.text
    rows = await _rows(stored, run_id)
    assert list(rows) == sorted(FILES)  # full relative paths, in key order
    for path, link in rows.items():
        got = await stored.client.get(link)
        assert (got.status_code, got.content) == (200, FILES[path]), path
        name = path.rpartition("/")[2]
        assert got.headers["content-disposition"] == f'attachment; filename="{name}"'
        assert got.headers["content-type"] == links.media_type(name)
        assert got.headers["x-content-type-options"] == "nosniff"
    assert "artifacts-more" not in page.text


async def test_a_run_without_artifacts_and_an_exchange_without_a_store_say_so(
        stored: Site, site: Site) -> None:
    alpha = await _member(stored, "alpha")
    run_id = await _run(stored, alpha, {})
    await stored.login()
    page = await stored.client.get(f"/ui/tracking/runs/{run_id}")
    assert page.status_code == 200 and "No artifacts logged yet" in page.text
    bare = await _run(site, await _member(site, "alpha"), {})
    await site.login()
    page = await site.client.get(f"/ui/tracking/runs/{bare}")
    assert page.status_code == 200 and "has no object store" in page.text
    signed = links.url(links.signing_key(site.state.key), links.grant(
        Kind.ARTIFACT, links.artifact_target(bare, "a.txt"), "alpha", site.clock()))
    refused = await site.client.get(signed)
    assert refused.status_code == 503 and "no object store" in refused.text


async def test_a_store_that_does_not_answer_leaves_the_rest_of_the_page(
        stored: Site, store: MemoryStore) -> None:
    alpha = await _member(stored, "alpha")
    run_id = await _run(stored, alpha, {"a.txt": b"a"})
    await stored.login()
    store.fail("list", StoreUnavailable("the store at store.test:8333 timed out"))
    page = await stored.client.get(f"/ui/tracking/runs/{run_id}")
    assert page.status_code == 200 and "<h2>Params</h2>" in page.text
    assert "the store did not list them: the store at store.test:8333 timed out" in page.text
    assert list(await _rows(stored, run_id)) == ["a.txt"]  # the next render lists them


async def test_a_run_with_many_artifacts_lists_the_first_and_counts_the_rest(
        stored: Site, store: MemoryStore) -> None:
    alpha = await _member(stored, "alpha")
    run_id = await _run(stored, alpha, {"a.txt": b"a"})
    for index in range(artifacts.LISTED + 4):  # the keys the artifact routes would write
        await store.put(f"tracking/alpha/{run_id}/steps/{index:04d}.txt", b"x")
    await stored.login()  # the admin: sees every project's runs
    rows = await _rows(stored, run_id)
    assert len(rows) == artifacts.LISTED and next(iter(rows)) == "a.txt"
    page = await stored.client.get(f"/ui/tracking/runs/{run_id}")
    assert "and 5 more, not listed here" in page.text
    assert (await stored.client.get(rows["a.txt"])).content == b"a"  # the admin's link works


async def test_another_project_gets_404_for_the_page_and_for_every_link(
        stored: Site, store: MemoryStore) -> None:
    alpha, beta = await _member(stored, "alpha"), await _member(stored, "beta")
    run_id = await _run(stored, alpha, FILES)
    await stored.login(alpha["Authorization"].removeprefix("Bearer "))
    alphas = list((await _rows(stored, run_id)).values())
    await stored.login(beta["Authorization"].removeprefix("Bearer "))
    page = await stored.client.get(f"/ui/tracking/runs/{run_id}")
    assert page.status_code == 404 and "notes.txt" not in page.text
    for link in alphas:
        got = await stored.client.get(link)
        assert got.status_code == 404, link
        assert all(data not in got.content for data in FILES.values())
    # a link for beta naming alpha's run (the key would have to leak for one to exist): the
    # run is not beta's, so nothing is read, not even what lies under beta's prefix for it
    await store.put(f"tracking/beta/{run_id}/notes.txt", b"under beta's prefix")
    key = links.signing_key(stored.state.key)
    forged = links.url(key, links.grant(Kind.ARTIFACT, links.artifact_target(
        run_id, "notes.txt"), "beta", stored.clock()))
    got = await stored.client.get(forged)
    assert got.status_code == 404 and b"beta's prefix" not in got.content


async def test_a_forged_tampered_or_expired_link_is_refused(stored: Site) -> None:
    alpha = await _member(stored, "alpha")
    run_id = await _run(stored, alpha, FILES)
    await stored.login(alpha["Authorization"].removeprefix("Bearer "))
    link = (await _rows(stored, run_id))["notes.txt"]
    body, _, mac = link.removeprefix(links.PATH).partition(".")
    other = links.sign(b"o" * 32, links.grant(Kind.ARTIFACT, links.artifact_target(
        run_id, "notes.txt"), "alpha", stored.clock()))
    weights = links.grant(Kind.ARTIFACT, links.artifact_target(run_id, "model/weights.bin"),
                          "alpha", stored.clock())
    swapped = links.sign(b"x" * 32, weights).partition(".")[0] + "." + mac
    for bad in (other, swapped, f"{body}.{mac[:-1]}{'A' if mac[-1] != 'A' else 'B'}", body):
        got = await stored.client.get(links.PATH + bad)
        assert got.status_code == 403, bad
        assert FILES["notes.txt"] not in got.content
    stored.clock.now += links.TTL_S
    expired = await stored.client.get(link)
    assert expired.status_code == 403 and "expired" in expired.text


async def test_a_signed_link_with_dot_dot_parts_reads_nothing(
        stored: Site, store: MemoryStore) -> None:
    alpha = await _member(stored, "alpha")
    run_id = await _run(stored, alpha, {})
    await store.put("tracking/beta/r2/secret.txt", b"beta's secret")
    await store.put(f"tracking/alpha/{run_id}/../secret.txt", b"odd key")
    await stored.login(alpha["Authorization"].removeprefix("Bearer "))
    key = links.signing_key(stored.state.key)
    for target in (f"{run_id}/../../beta/r2/secret.txt", f"{run_id}/../secret.txt",
                   f"{run_id}/./x", "../beta/r2/secret.txt"):
        made = links.url(key, links.grant(Kind.ARTIFACT, target, "alpha", stored.clock()))
        got = await stored.client.get(made)
        assert got.status_code == 422, target  # InvalidInput, as a bad field
        assert b"beta's secret" not in got.content and b"odd key" not in got.content
    put = await stored.client.put(f"{ARTIFACTS}/0/{run_id}/artifacts/a/%2E%2E/b.txt",
                                  content=b"x", headers=alpha)
    assert put.status_code == 400  # the artifact routes refuse such a path too


async def test_the_page_escapes_an_artifacts_name(stored: Site) -> None:
    alpha = await _member(stored, "alpha")
    evil = '<script>alert("x")</script>.txt'
    run_id = await _run(stored, alpha, {evil: b"payload"})
    await stored.login(alpha["Authorization"].removeprefix("Bearer "))
    page = await stored.client.get(f"/ui/tracking/runs/{run_id}")
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;.txt" in page.text
    link = (await _rows(stored, run_id))[evil]
    got = await stored.client.get(link)
    assert got.content == b"payload"
    assert got.headers["content-disposition"] == 'attachment; filename="script_.txt"'
    assert got.headers["content-type"] == "text/plain; charset=utf-8"


@asynccontextmanager
async def _served(site: Site) -> AsyncIterator[str]:
    """The site's app on a loopback port in the test's loop (its lifespan is the site's)."""
    config = uvicorn.Config(site.app, host="127.0.0.1", port=0, lifespan="off",
                            log_level="warning")
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup()
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        for listener in server.servers:
            listener.close()
        for connection in list(server.server_state.connections):
            connection.shutdown()


@pytest.mark.slow
async def test_what_the_real_mlflow_client_logs_downloads_from_the_page(
        stored: Site, tmp_path: Path) -> None:
    pytest.importorskip("mlflow", reason="mlflow-skinny is in the dev extra")
    alpha = await _member(stored, "alpha")
    token = alpha["Authorization"].removeprefix("Bearer ")
    (tmp_path / "script.py").write_text(f"FILES = {FILES!r}\n{SCRIPT}")
    async with _served(stored) as url:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "script.py", cwd=tmp_path, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env={
                **os.environ, "MLFLOW_TRACKING_URI": url, "MLFLOW_TRACKING_TOKEN": token,
                "GIT_PYTHON_REFRESH": "quiet"})
        out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, out.decode()[-3000:]
    run_id = out.decode().split()[-1]
    await stored.login(token)
    rows = await _rows(stored, run_id)
    assert list(rows) == sorted(FILES)
    for path, link in rows.items():
        assert (await stored.client.get(link)).content == FILES[path], path
