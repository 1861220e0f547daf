"""The interruption-notice watcher against a local IMDSv2 (tests/agent/imds_stub.py): tokens,
their renewal, each notice once, and a service that fails or answers nonsense."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import httpx
import pytest
from imds_stub import ACTION_PATH, ImdsStub

from bourse.agent.imds import Metadata, NoticeWatcher
from bourse.core.interruption import Notice

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stub() -> Iterator[ImdsStub]:
    made = ImdsStub()
    yield made
    made.close()


def watching(url: str, clock: Clock | None = None, ttl_s: int = 21600) -> NoticeWatcher:
    async def ignore(notice: Notice) -> None:
        pass

    return NoticeWatcher(Metadata(url, ttl_s=ttl_s, clock=clock or Clock()), ignore,
                         interval_s=0.01)


async def test_the_stub_refuses_reads_without_a_token_as_imdsv2_does(stub: ImdsStub) -> None:
    async with httpx.AsyncClient(base_url=stub.url) as http:
        assert (await http.get(ACTION_PATH)).status_code == 401
        assert (await http.put("/latest/api/token")).status_code == 400  # no TTL header
        token = (await http.put("/latest/api/token", headers={
            "X-aws-ec2-metadata-token-ttl-seconds": "60"})).text
        assert (await http.get(ACTION_PATH, headers={
            "X-aws-ec2-metadata-token": token})).status_code == 404


async def test_no_notice_then_a_notice_seen_once(stub: ImdsStub) -> None:
    watcher = watching(stub.url)
    assert await watcher.poll_once() is None
    at = stub.notice("terminate")
    assert await watcher.poll_once() == Notice("terminate", at)
    assert await watcher.poll_once() is None  # the same notice, still served: once
    later = stub.notice("stop", at + 60)
    assert await watcher.poll_once() == Notice("stop", later)  # a new one is new
    assert (stub.puts, stub.gets, stub.refused) == (1, 4, 0)  # one token for every read
    await watcher.metadata.aclose()


async def test_the_token_is_renewed_before_it_lapses(stub: ImdsStub) -> None:
    clock = Clock()
    watcher = watching(stub.url, clock, ttl_s=100)
    await watcher.poll_once()
    clock.now += 89  # within 90 % of its life: kept
    await watcher.poll_once()
    assert stub.puts == 1
    clock.now += 2
    await watcher.poll_once()
    assert (stub.puts, stub.refused) == (2, 0)
    await watcher.metadata.aclose()


async def test_a_token_the_service_forgot_is_replaced_at_once(stub: ImdsStub) -> None:
    watcher = watching(stub.url)
    await watcher.poll_once()
    stub.forget_tokens()
    at = stub.notice()
    assert await watcher.poll_once() == Notice("terminate", at)  # 401, new token, read again
    assert (stub.puts, stub.refused) == (2, 1)
    await watcher.metadata.aclose()


async def test_failures_are_logged_once_and_polling_goes_on(
        stub: ImdsStub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bourse.agent.imds")
    watcher = watching(stub.url)
    stub.notice()
    stub.status = 500
    for _ in range(3):
        assert await watcher.poll_once() is None
    stub.status = 200
    stub.body = "<html>not the metadata service</html>"
    assert await watcher.poll_once() is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0].getMessage()
    at = stub.notice()
    assert await watcher.poll_once() == Notice("terminate", at)
    assert "answers again" in caplog.records[-1].getMessage()
    await watcher.metadata.aclose()


async def test_an_unreachable_service_is_a_failure_not_a_crash(
        caplog: pytest.LogCaptureFixture) -> None:
    gone = ImdsStub()
    url = gone.url
    gone.close()  # nothing listens there any more
    watcher = watching(url)
    assert await watcher.poll_once() is None
    assert await watcher.poll_once() is None
    assert [r.levelname for r in caplog.records if r.name == "bourse.agent.imds"] == ["WARNING"]
    assert "ConnectError" in caplog.records[-1].getMessage()
    await watcher.metadata.aclose()


async def test_the_loop_delivers_each_notice_once_and_survives_its_handler(
        stub: ImdsStub) -> None:
    seen: list[Notice] = []

    async def handler(notice: Notice) -> None:
        seen.append(notice)
        if len(seen) == 1:
            raise RuntimeError("a bug in the handler")

    watcher = NoticeWatcher(Metadata(stub.url), handler, interval_s=0.01)
    task = asyncio.create_task(watcher.run())
    first = stub.notice(at=2_000_000_000)
    while not seen:
        await asyncio.sleep(0.01)
    second = stub.notice(at=2_000_000_060)
    while len(seen) < 2:
        await asyncio.sleep(0.01)
    gets = stub.gets
    while stub.gets < gets + 3:  # still polling, nothing new to deliver
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert seen == [Notice("terminate", first), Notice("terminate", second)]


async def test_the_looks_do_not_fill_the_log(stub: ImdsStub,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    watcher = watching(stub.url)
    for _ in range(3):
        await watcher.poll_once()
    requests = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert len(requests) == 1 and "PUT" in requests[0]  # the token's, every few hours
    await watcher.metadata.aclose()
