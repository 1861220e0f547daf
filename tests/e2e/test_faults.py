"""The faults the exchange must survive, each with real processes: a coordinator and agents
started as `python -m bourse`, jobs run by the agents' shims, a TCP proxy that partitions the
network, a network namespace with a firewall.

The jobs print numbered lines (``job_lines``), so every test can check that each line arrived
exactly once and in order. Keep-alives are short (K = 1 s unless a test says why not) and so is
the loss window (W = 10 s, see conftest.py): a node silent for W is lost, and its attempts stop
themselves just before. Sleeps appear only where the duration of a fault is the point.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import raw_agent
from harness import Agent, Cluster, Exchange
from job_lines import expected, lines_job, printed, stored_lines
from netns import Netns, require_tools
from tcp_proxy import TcpProxy

from bourse.protocol.api import JobDetail
from bourse.sdk.client import Client
from bourse.server.app import create_app
from bourse.server.config import ServerConfig, StoreConfig

pytestmark = pytest.mark.slow

ExchangeFactory = Callable[..., Exchange]
ProxyFactory = Callable[[Exchange], TcpProxy]


def disk_lines(agent: Agent, job_id: str, attempt: int = 1) -> int:
    """Lines the job has printed so far, read from its log file on the node."""
    return agent.stdout(job_id, attempt).count(b"\n")


def exited_events(client: Client, job_id: str, attempt: int) -> int:
    return sum(1 for e in client.events(job_id) if e.attempt == attempt and e.kind == "exited")


def attempt_states(detail: JobDetail) -> list[tuple[str, str]]:
    return [(a.state, a.node_id) for a in detail.attempts]


def wait_heartbeat(exchange: Exchange, node_id: str) -> None:
    """Return just after the coordinator records a heartbeat of the node (so a partition that
    starts now has the whole silence budget of three keep-alives)."""
    seen = exchange.client.node(node_id).last_seen
    exchange.wait_for(lambda: exchange.client.node(node_id).last_seen != seen,
                      5 * exchange.keep_alive, f"a heartbeat of {node_id}")


def holds(predicate: Callable[[], bool], seconds: float) -> bool:
    """Whether ``predicate`` stays true for ``seconds`` (False as soon as it fails)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(0.02)
    return True


def assert_complete(client: Client, job_id: str, attempt: int, lines: int) -> None:
    assert printed(client, job_id, attempt) == expected(lines)
    assert exited_events(client, job_id, attempt) == 1, client.events(job_id)


# --- 1. the coordinator is killed ---------------------------------------------------------------

def test_coordinator_killed_while_jobs_run(exchange_factory: ExchangeFactory) -> None:
    # K = 10 s: the outage (a restart is seconds of Python start-up) plus the agent's reconnect
    # backoff (up to 10 s) stays inside 3 keep-alives; a longer outage is the next test.
    exchange = exchange_factory(keep_alive=10.0)
    agent = exchange.agent("a")
    jobs = [exchange.client.submit(lines_job(40)).id for _ in range(3)]
    for job in jobs:
        exchange.wait_for(lambda job=job: stored_lines(exchange.client, job) >= 5, 30,
                          f"the first lines of {job}")

    exchange.coordinator.kill9()
    for job in jobs:  # the jobs go on printing while no coordinator listens
        printed_before = disk_lines(agent, job)
        exchange.wait_for(lambda job=job, n=printed_before: disk_lines(agent, job) > n + 3,
                          10, f"{job} to print during the outage")
    exchange.coordinator.start()

    for job in jobs:
        detail = exchange.wait_ended(job)
        assert detail.state == "SUCCEEDED", detail
        assert attempt_states(detail) == [("SUCCEEDED", agent.node_id)]
        assert_complete(exchange.client, job, 1, 40)


@pytest.mark.parametrize("keep_alive", [1.0, 2.0], ids=["K=1s", "K=2s"])
def test_coordinator_killed_while_jobs_finish(exchange_factory: ExchangeFactory,
                                              keep_alive: float) -> None:
    """Short keep-alives and the default loss window: jobs that exit 0 while no coordinator
    listens end SUCCEEDED, once, on their one attempt — none is given up and run again."""
    exchange = exchange_factory(keep_alive=keep_alive, loss_window=120.0)
    agent = exchange.agent("a")
    jobs = [exchange.client.submit(lines_job(30, 0.1)).id for _ in range(6)]
    for job in jobs:
        exchange.wait_for(lambda job=job: stored_lines(exchange.client, job) >= 2, 30,
                          f"the first lines of {job}")

    exchange.coordinator.kill9()
    for job in jobs:
        exchange.wait_for(lambda job=job: (agent.attempt_dir(job, 1) / "exit").exists(), 30,
                          f"{job} to exit while no coordinator listens")
    time.sleep(2 * keep_alive)  # and the outage goes on a while
    exchange.coordinator.start()

    for job in jobs:
        detail = exchange.wait_ended(job)
        assert detail.state == "SUCCEEDED", detail
        assert attempt_states(detail) == [("SUCCEEDED", agent.node_id)]
        assert_complete(exchange.client, job, 1, 30)


def test_coordinator_down_longer_than_three_keep_alives(exchange_factory: ExchangeFactory,
                                                        proxy_to: ProxyFactory) -> None:
    # W = 30 s: the outage, the restart (seconds of Python start-up on a busy machine) and the
    # hold below stay inside one lease; the window, not the keep-alive, is what counts.
    exchange = exchange_factory(keep_alive=1.5, loss_window=30.0)
    proxy = proxy_to(exchange)
    agent = exchange.agent("a", proxy.url)
    job = exchange.client.submit(lines_job(60)).id
    exchange.wait_for(lambda: stored_lines(exchange.client, job) >= 3, 30, "the first lines")

    proxy.cut()  # so the agent cannot win a race with the restarted coordinator's first tick
    exchange.coordinator.kill9()
    time.sleep(3.5 * exchange.keep_alive)  # the outage: longer than 3 keep-alives
    exchange.coordinator.start()
    node_id = agent.node_id
    assert node_id is not None
    # Kept away past the coordinator's first ticks (one a second) and for more than 3
    # keep-alives (4.5 s) of the coordinator's life, the node must not be declared lost.
    stays_online = holds(lambda: exchange.client.node(node_id).state != "lost", 5.0)
    proxy.restore()
    assert stays_online, "the restarted coordinator declared the node lost at once"

    detail = exchange.wait_ended(job)
    assert detail.state == "SUCCEEDED"
    assert attempt_states(detail) == [("SUCCEEDED", node_id)], detail.attempts
    assert_complete(exchange.client, job, 1, 60)


# --- 2. the agent's connection is cut ----------------------------------------------------------

PARTITIONS = pytest.mark.parametrize("silent", [False, True], ids=["dropped", "silent"])


@PARTITIONS
def test_short_partition_keeps_the_attempt(exchange: Exchange, proxy_to: ProxyFactory,
                                           silent: bool) -> None:
    """Dropped: both ends see the connection close and the agent redials (blackholed until the
    restore). Silent: nothing crosses and nobody is told; the same connection may resume."""
    proxy = proxy_to(exchange)
    agent = exchange.agent("a", proxy.url)
    node_id = agent.node_id
    assert node_id is not None
    job = exchange.client.submit(lines_job(50)).id
    exchange.wait_for(lambda: stored_lines(exchange.client, job) >= 3, 30, "the first lines")

    wait_heartbeat(exchange, node_id)
    connections = proxy.forwarded
    proxy.cut(silent=silent)
    on_disk = disk_lines(agent, job)
    time.sleep(1.5 * exchange.keep_alive)  # the partition: over 1 keep-alive, under 3
    printed_meanwhile = disk_lines(agent, job) - on_disk
    stored_before_restore = stored_lines(exchange.client, job)
    proxy.restore()

    detail = exchange.wait_ended(job)
    assert printed_meanwhile >= 5, "the job did not print while cut off"
    assert stored_before_restore <= on_disk, "lines got through the partition"
    if not silent:
        assert proxy.forwarded > connections, "the agent never reconnected: was it cut off?"
    assert detail.state == "SUCCEEDED"
    assert attempt_states(detail) == [("SUCCEEDED", node_id)], detail.attempts
    assert not [e for e in exchange.client.events(job) if e.kind == "node_lost"]
    assert_complete(exchange.client, job, 1, 50)


@PARTITIONS
def test_long_partition_fences_the_attempt_and_retries_elsewhere(
        exchange: Exchange, proxy_to: ProxyFactory, silent: bool) -> None:
    """Cut off past the loss window: attempt 1 stops itself before the coordinator gives it
    up, so it never runs beside attempt 2; the job's result is attempt 2's."""
    proxy = proxy_to(exchange)
    cut_off = exchange.agent("a", proxy.url)
    # Attempt 1 would run for a minute and fail: the job's result must be attempt 2's.
    job = exchange.client.submit(lines_job(20, first_lines=600, first_exit=3)).id
    exchange.wait_running(job)
    exchange.wait_for(lambda: stored_lines(exchange.client, job) >= 3, 30, "the first lines")
    other = exchange.agent("b")
    assert cut_off.job_pid(job, 1) is not None

    proxy.cut(silent=silent)
    detail = exchange.wait_running(job, timeout=exchange.loss_window + 15, attempt=2)
    assert cut_off.job_pid(job, 1) is None, "attempt 1 ran on beside attempt 2"
    assert attempt_states(detail) == [("LOST", cut_off.node_id), ("RUNNING", other.node_id)]
    assert (cut_off.attempt_dir(job, 1) / "fenced").exists()
    proxy.restore()

    detail = exchange.wait_ended(job)
    assert (detail.state, detail.exit_code, detail.attempt) == ("SUCCEEDED", 0, 2)
    assert attempt_states(detail) == [("LOST", cut_off.node_id), ("SUCCEEDED", other.node_id)]
    assert_complete(exchange.client, job, 2, 20)
    stale_lines = printed(exchange.client, job, 1)  # what got through before the cut, and no more
    assert stale_lines == expected(len(stale_lines))
    assert len(stale_lines) < 600


@pytest.mark.parametrize(("keep_alive", "cut_s"), [(1.0, 2.0), (5.0, 10.0)],
                         ids=["2-keep-alives", "10s-at-bourse-up-keep-alive"])
def test_a_cut_of_twice_the_keep_alive_costs_nothing(
        exchange_factory: ExchangeFactory, proxy_to: ProxyFactory, keep_alive: float,
        cut_s: float) -> None:
    """A link that blinks for two keep-alives (at `bourse up`'s 5 s: 10 s) is no loss: the
    loss window is its own setting (here the default, two minutes)."""
    exchange = exchange_factory(keep_alive=keep_alive, loss_window=120.0)
    proxy = proxy_to(exchange)
    agent = exchange.agent("a", proxy.url)
    lines = int((cut_s + keep_alive + 4) / 0.1)  # it runs past the cut and its heartbeat wait
    job = exchange.client.submit(lines_job(lines, 0.1)).id
    exchange.wait_for(lambda: stored_lines(exchange.client, job) >= 3, 30, "the first lines")
    wait_heartbeat(exchange, agent.node_id or "")
    proxy.cut(silent=True)
    time.sleep(cut_s)
    proxy.restore()
    detail = exchange.wait_ended(job, timeout=lines * 0.1 + 30)
    assert detail.state == "SUCCEEDED"
    assert attempt_states(detail) == [("SUCCEEDED", agent.node_id)], detail.attempts
    assert not [e for e in exchange.client.events(job) if e.kind == "node_lost"]
    assert_complete(exchange.client, job, 1, lines)


def test_a_success_heard_after_the_loss_window_ends_the_job_once(
        exchange: Exchange, proxy_to: ProxyFactory) -> None:
    """The job exits 0 while its node is cut off; the coordinator gives the node up and places
    the job elsewhere; the node comes back and reports the success: the job ends SUCCEEDED with
    attempt 1's result, once, and attempt 2 is stopped."""
    proxy = proxy_to(exchange)
    cut_off = exchange.agent("a", proxy.url)
    # attempt 1: 2 s, well inside the node's lease (the loss window less the fence's margin,
    # 8.3 s after the cut): a loaded machine once stretched a 5 s attempt past it, and the
    # attempt was fenced instead of succeeding
    # a verified before the job and b: the job runs on a (b, verified first, once took it)
    exchange.wait_for(lambda: next((n.verification_status for n in exchange.client.nodes()
                                    if n.id == cut_off.node_id), None) in ("pass", "warn"), 30,
                      "a to be verified")
    job = exchange.client.submit(lines_job(400, 0.05, first_lines=40)).id
    other = exchange.agent("b")
    exchange.wait_for(lambda: stored_lines(exchange.client, job) >= 3, 30, "the first lines")
    assert exchange.client.job(job).node_id == cut_off.node_id
    wait_heartbeat(exchange, cut_off.node_id or "")
    proxy.cut(silent=True)
    attempt = cut_off.attempt_dir(job, 1)
    exchange.wait_for(lambda: (attempt / "exit").exists() or (attempt / "fenced").exists(), 30,
                      "attempt 1 to exit while cut off")
    assert not (attempt / "fenced").exists(), "attempt 1 was fenced before it could succeed"
    exchange.wait_running(job, timeout=exchange.loss_window + 15, attempt=2)
    proxy.restore()
    detail = exchange.wait_ended(job, timeout=30)
    assert (detail.state, detail.exit_code, detail.node_id) == ("SUCCEEDED", 0, cut_off.node_id)
    assert attempt_states(detail) == [("SUCCEEDED", cut_off.node_id),
                                      ("CANCELLED", other.node_id)], detail.attempts
    exchange.wait_for(lambda: other.job_pid(job, 2) is None, 15, "attempt 2 to be stopped")
    assert_complete(exchange.client, job, 1, 40)
    ended = [e.state for e in exchange.client.events(job)
             if e.kind == "state" and e.state in ("SUCCEEDED", "FAILED", "CANCELLED")]
    assert ended == ["SUCCEEDED"]


# --- 3. an agent is killed ---------------------------------------------------------------------

def test_killed_agent_orphan_stops_itself_before_the_retry(exchange: Exchange) -> None:
    """The agent dies; its job, alone, stops itself before the loss window ends, so the retry
    elsewhere never runs beside it; the restarted agent reports why it stopped."""
    killed = exchange.agent("a")
    job = exchange.client.submit(lines_job(20, first_lines=600, first_exit=3)).id
    exchange.wait_running(job)
    other = exchange.agent("b")
    assert killed.job_pid(job, 1) is not None

    killed.kill9()
    detail = exchange.wait_running(job, timeout=exchange.loss_window + 15, attempt=2)
    assert killed.job_pid(job, 1) is None, "the orphan ran on beside the retry"
    assert attempt_states(detail) == [("LOST", killed.node_id), ("RUNNING", other.node_id)]

    killed.proc.start()  # same work dir, no token: it reports the fenced exit, stale by now
    exchange.wait_connected(killed)
    detail = exchange.wait_ended(job)
    assert (detail.state, detail.attempt) == ("SUCCEEDED", 2)
    assert attempt_states(detail) == [("LOST", killed.node_id), ("SUCCEEDED", other.node_id)]
    assert_complete(exchange.client, job, 2, 20)
    exchange.wait_for(lambda: exited_events(exchange.client, job, 1) == 1, 15,
                      "the restarted agent to report attempt 1's end")
    [exited] = [e for e in exchange.client.events(job) if e.attempt == 1 and e.kind == "exited"]
    assert exited.data.get("fenced") is True, exited


def test_killed_agent_restarted_in_time_readopts_its_jobs(
        exchange_factory: ExchangeFactory) -> None:
    # K = 10 s: the restart (seconds of Python start-up) stays inside 3 keep-alives.
    exchange = exchange_factory(keep_alive=10.0)
    agent = exchange.agent("a")
    running_on = exchange.client.submit(lines_job(60, 0.05)).id
    ends_meanwhile = exchange.client.submit(lines_job(10, 0.05, first_lines=10, first_exit=3)).id
    for job in (running_on, ends_meanwhile):
        exchange.wait_running(job)

    agent.kill9()
    exchange.wait_for(lambda: agent.job_pid(ends_meanwhile, 1) is None, 10,
                      "a job to end while its agent is dead")
    assert agent.job_pid(running_on, 1) is not None, "the job should survive its agent"
    agent.proc.start()

    detail = exchange.wait_ended(running_on)
    assert attempt_states(detail) == [("SUCCEEDED", agent.node_id)]
    assert_complete(exchange.client, running_on, 1, 60)
    detail = exchange.wait_ended(ends_meanwhile)
    assert (detail.state, detail.exit_code) == ("FAILED", 3), detail
    assert attempt_states(detail) == [("FAILED", agent.node_id)]
    assert_complete(exchange.client, ends_meanwhile, 1, 10)


# --- 4. the node takes no inbound connections --------------------------------------------------

def can_connect(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def test_agent_behind_a_firewall_that_drops_inbound(cluster: Cluster,
                                                   exchange_factory: ExchangeFactory) -> None:
    require_tools()
    ns = Netns()
    cluster.closers.append(ns.delete)
    ns.create()
    listener = ns.listen(7000)
    cluster.closers.append(lambda: ns.stop(listener))
    assert can_connect(ns.ns_ip, 7000), "the namespace is not reachable even without a firewall"

    ns.drop_inbound()
    assert not can_connect(ns.ns_ip, 7000), "a connection into the namespace got through"
    assert ns.dial_inside(ns.ns_ip, 7000), "the listener inside the namespace is gone"

    exchange = exchange_factory(host=ns.host_ip)
    agent = exchange.agent("walled", prefix=ns.prefix)
    job = exchange.client.submit(lines_job(10, 0.02)).id
    detail = exchange.wait_ended(job)
    assert detail.state == "SUCCEEDED"
    assert attempt_states(detail) == [("SUCCEEDED", agent.node_id)]
    assert_complete(exchange.client, job, 1, 10)


# --- 5. garbage --------------------------------------------------------------------------------

JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Garbage:
    method: str
    path: str
    status: int
    field: str | None
    options: dict[str, Any]


def case(name: str, method: str, path: str, status: int, field: str | None = None, *,
         bug: str | None = None, **options: Any) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=f"BUG: {bug}")] if bug else []
    return pytest.param(Garbage(method, path, status, field, options), id=name, marks=marks)


API_GARBAGE = [
    case("command-not-a-list", "POST", "/jobs", 422, "command", json={"command": "echo hi"}),
    case("retries-not-a-number", "POST", "/jobs", 422, "max_retries",
         json={"command": ["x"], "max_retries": "lots"}),
    case("cpus-not-a-size", "POST", "/jobs", 422, "compute.cpus",
         json={"command": ["x"], "compute": {"cpus": "many"}}),
    case("unknown-gpu", "POST", "/jobs", 422, "compute.gpu",
         json={"command": ["x"], "compute": {"gpu": "warp9"}}),
    case("bad-env-name", "POST", "/jobs", 422, "env.1BAD.[key]",
         json={"command": ["x"], "env": {"1BAD": "v"}}),
    case("bundle-never-uploaded", "POST", "/jobs", 422, "bundle",
         json={"command": ["x"], "bundle": "0" * 64}),
    case("command-too-long", "POST", "/jobs", 422, "command", json={"command": ["x"] * 5000}),
    case("spec-not-an-object", "POST", "/jobs", 422, json=[]),
    case("deeply-nested-json", "POST", "/jobs", 400, content=b"[" * 100_000, headers=JSON),
    case("limit-not-a-number", "GET", "/jobs?limit=abc", 422, "query.limit"),
    case("unknown-state", "GET", "/jobs?state=BOGUS", 422, "query.state"),
    case("unknown-job", "GET", "/jobs/j-nope", 404),
    case("cancel-unknown-job", "POST", "/jobs/j-nope/cancel", 404),
    case("logs-of-unknown-job", "GET", "/jobs/j-nope/logs", 404),
    case("negative-cursor", "GET", "/jobs/j-nope/logs?after=-1", 422, "query.after"),
    case("events-of-unknown-job", "GET", "/jobs/j-nope/events", 404),
    case("follow-unknown-job", "GET", "/jobs/j-nope/logs/follow", 404),
    case("unknown-node", "GET", "/nodes/n-nope", 404),
    case("negative-expiry", "POST", "/enrollments", 422, "expires_in_s",
         json={"expires_in_s": -1}),
    case("zero-offers", "POST", "/offers", 422, "limit", json={"limit": 0}),
    case("bundle-name-not-a-sha", "PUT", "/bundles/not-a-sha", 422, "path.sha256", content=b"x"),
    case("bundle-bytes-not-its-sha", "PUT", f"/bundles/{'a' * 64}", 422, "sha256",
         content=b"x"),
    case("wrong-method", "DELETE", "/jobs", 405),
    case("no-token", "GET", "/jobs", 401, headers={"Authorization": ""}),
    case("forged-token", "GET", "/jobs", 401, headers={"Authorization": "Bearer bse_u_forged"}),
    case("basic-auth", "GET", "/jobs", 401, headers={"Authorization": "Basic YWRtaW46YWRtaW4="}),
    case("admin-token-to-enrol", "POST", "/agent/enroll", 401, json={"name": "x"}),
    case("malformed-json", "POST", "/jobs", 422, "body", content=b'{"command": [', headers=JSON),
    case("invalid-utf8-as-text", "POST", "/jobs", 422, content=b"\xff\xfe{",
         headers={"Content-Type": "text/plain"}),
    case("infinite-number", "POST", "/jobs", 422, "max_retries",
         content=b'{"command": ["x"], "max_retries": 1e999}', headers=JSON),
]


@pytest.fixture(scope="module")
def api_exchange(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exchange]:
    """One coordinator for every API garbage case (they change nothing that matters)."""
    cluster = Cluster(tmp_path_factory.mktemp("api"))
    try:
        yield Exchange(cluster, 1.0).start()
    finally:
        cluster.close()


@pytest.mark.parametrize("garbage", API_GARBAGE)
def test_api_garbage_is_a_4xx_naming_the_field(api_exchange: Exchange, garbage: Garbage) -> None:
    options = dict(garbage.options)
    headers = {"Authorization": f"Bearer {api_exchange.coordinator.token}",
               **options.pop("headers", {})}
    response = httpx.request(garbage.method, f"{api_exchange.coordinator.url}/api/v1"
                             f"{garbage.path}", headers=headers, timeout=10, **options)
    assert response.status_code == garbage.status, response.text
    body = response.json()
    assert isinstance(body["error"], str) and body["error"], body
    if garbage.field is not None:
        assert body["field"] == garbage.field, body


@pytest.mark.anyio
async def test_oversize_bundle_is_refused(tmp_path: Path) -> None:
    """In process: the CLI has no flag for the limit, and 512 MiB is too much to send here."""
    limit = 1 << 20
    config = ServerConfig(data_dir=tmp_path, bundle_max_bytes=limit,
                          credentials_path=tmp_path / "admin.json", store=StoreConfig.none())
    app = create_app(config, run_scheduler=False)
    big, small = b"b" * (limit + 1), b"s" * limit
    big_path, small_path = (f"/api/v1/bundles/{hashlib.sha256(b).hexdigest()}"
                            for b in (big, small))
    async with app.router.lifespan_context(app):
        token = json.loads((tmp_path / "admin.json").read_text())["token"]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://bourse.test",
                                     headers={"Authorization": f"Bearer {token}"}) as http:
            response = await http.put(big_path, content=big)
            assert response.status_code == 413, response.text
            assert "1 MiB" in response.json()["error"]
            assert (await http.head(big_path)).status_code == 404
            assert not list(config.bundles_dir.rglob(".upload-*")), "a partial upload was kept"
            response = await http.put(small_path, content=small)
            assert response.status_code == 201, response.text


def test_garbage_on_the_agent_socket(exchange: Exchange, proxy_to: ProxyFactory) -> None:
    proxy = proxy_to(exchange)
    real = exchange.agent("real", proxy.url)
    job = exchange.client.submit(lines_job(60)).id
    exchange.wait_running(job)
    connections = proxy.accepted
    url, credential = exchange.coordinator.url, raw_agent.enroll(exchange.client, "raw")

    for name, first in BEFORE_HELLO:
        with raw_agent.open_socket(url, credential) as ws:
            ws.send(first)
            assert raw_agent.close_code(ws) == CLOSE_POLICY, name
    for name, garbage, codes in AFTER_HELLO:
        with raw_agent.welcomed(url, credential) as ws:
            ws.send(garbage)
            assert raw_agent.close_code(ws) in codes, name
    hostile_but_well_formed(url, credential, job)

    assert exchange.client.job(job).state == "RUNNING", "the garbage ended the real job"
    second = exchange.client.submit(lines_job(5, 0.02)).id
    for done in (job, second):
        detail = exchange.wait_ended(done)
        assert (detail.state, detail.exit_code) == ("SUCCEEDED", 0), detail
        assert attempt_states(detail) == [("SUCCEEDED", real.node_id)]
    assert_complete(exchange.client, job, 1, 60)
    assert_complete(exchange.client, second, 1, 5)
    assert proxy.accepted == connections, "the real agent lost its connection meanwhile"


def hostile_but_well_formed(url: str, credential: str, job: str) -> None:
    """Valid frames that lie: an unknown type, and claims on another node's job."""
    ref = {"job_id": job, "attempt": 1}
    with raw_agent.welcomed(url, credential) as ws:
        ws.send(raw_agent.frame("bogus", {}, "m1"))
        error = raw_agent.receive_type(ws, "error")["body"]
        assert error["ref"] == "m1" and "bogus" in error["message"], error
        ws.send(raw_agent.frame("job_event", {**ref, "seq": 99, "kind": "exited", "time": 0,
                                              "data": {"exit_code": 7}}, "m2"))
        ws.send(raw_agent.frame("log_chunk", {**ref, "seq": 100, "stream": "stdout",
                                              "offset": 0, "data": "Zm9yZ2VkCg==",
                                              "time": 0}, "m3"))
        ws.send(raw_agent.frame("heartbeat", {"time": 0, "running": [ref]}, "m4"))
        acked: set[str] = set()
        while not {"m2", "m3", "m4"} <= acked:
            acked.update(raw_agent.receive_type(ws, "ack")["body"]["ids"])
        cancel = raw_agent.receive_type(ws, "cancel_job")["body"]
        assert (cancel["job_id"], cancel["stale"]) == (job, True), cancel


CLOSE_POLICY, CLOSE_MALFORMED, CLOSE_TOO_BIG = 1008, 1003, 1009
BEFORE_HELLO = [
    ("not json", "not json"),
    ("a heartbeat before the hello", raw_agent.frame("heartbeat", {"time": 0})),
    ("a hello without capabilities", raw_agent.frame("hello", {"name": "raw"})),
    ("a hello whose body is a list", json.dumps({"v": 1, "id": "x", "type": "hello",
                                                 "body": []})),
]
AFTER_HELLO = [  # (what, frame, acceptable close codes)
    ("not json", "}{", {CLOSE_MALFORMED}),
    ("a job_event of wrong types", raw_agent.frame("job_event", {"job_id": "j", "attempt": "one"}),
     {CLOSE_MALFORMED}),
    ("10 MiB of non-JSON", "x" * (10 << 20), {CLOSE_MALFORMED}),
    ("a frame over the 16 MiB limit", "x" * (20 << 20), {CLOSE_TOO_BIG}),
    ("a binary frame", b"\x00\x01", {CLOSE_MALFORMED, CLOSE_POLICY}),
    ("JSON nested too deep", "[" * 100_000 + "]" * 100_000, {CLOSE_MALFORMED, CLOSE_POLICY}),
]


@pytest.mark.parametrize("first", [b"\x00\x01", "[" * 100_000 + "]" * 100_000],
                         ids=["binary", "deeply-nested-json"])
def test_undecodable_hello_is_closed_as_malformed(exchange: Exchange, first: str | bytes) -> None:
    credential = raw_agent.enroll(exchange.client, "raw")
    with raw_agent.open_socket(exchange.coordinator.url, credential) as ws:
        ws.send(first)
        assert raw_agent.close_code(ws) in (CLOSE_POLICY, CLOSE_MALFORMED)
