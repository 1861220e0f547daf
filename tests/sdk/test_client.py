"""The sync client over httpx.MockTransport: requests as the API expects, errors mapped once."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sdk_fakes import TOKEN, URL, chunk, job

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput, NotFound
from bourse.core.states import AttemptState, JobState, NodeState
from bourse.protocol.common import JobSpec
from bourse.sdk import core
from bourse.sdk.client import Client
from bourse.sdk.errors import (
    ApiError,
    Conflict,
    Forbidden,
    ProtocolError,
    ServerError,
    TooLarge,
    Unauthorized,
    Unreachable,
    WaitTimeout,
)

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records requests and answers from a script."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.bodies.append(request.read())
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def client(handler: Handler, url: str = URL) -> Client:
    return Client(url, TOKEN, transport=httpx.MockTransport(handler))


def ok(body: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=body)


def test_submit_posts_the_spec_with_the_token() -> None:
    rec = Recorder(ok(job(), 201))
    spec = JobSpec(command=["python", "train.py"], compute=Compute("a100", cpus="8+"),
                   env={"SEED": "1"})
    view = client(rec).submit(spec)
    assert view.id == "j1" and view.state == "PENDING"
    request = rec.last
    assert (request.method, request.url.path) == ("POST", "/api/v1/jobs")
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["user-agent"].startswith("bourse/")
    assert JobSpec.model_validate_json(rec.bodies[-1]) == spec


@pytest.mark.parametrize("url", [URL, URL + "/", URL + "/api/v1", URL + "/api/v1/"])
def test_base_url_with_or_without_prefix(url: str) -> None:
    rec = Recorder(ok({"jobs": []}))
    assert client(rec, url).jobs() == []
    assert str(rec.last.url) == f"{URL}/api/v1/jobs?limit=100"


def test_base_url_needs_a_scheme() -> None:
    with pytest.raises(InvalidInput, match="http://"):
        core.base_url("localhost:8000")


@pytest.mark.parametrize(("call", "method", "path", "params"), [
    (lambda c: c.jobs("running", 5), "GET", "/jobs", {"state": "RUNNING", "limit": "5"}),
    (lambda c: c.cancel("j1"), "POST", "/jobs/j1/cancel", {}),
    (lambda c: c.events("j1", after=7), "GET", "/jobs/j1/events", {"after": "7"}),
    (lambda c: c.logs("j1", after=3, limit=50), "GET", "/jobs/j1/logs",
     {"after": "3", "limit": "50"}),
    (lambda c: c.logs("j1", rank=2), "GET", "/jobs/j1/logs",
     {"after": "0", "limit": "1000", "rank": "2"}),
    (lambda c: c.node("n1"), "GET", "/nodes/n1", {}),
])
def test_paths_and_parameters(call: Callable[[Client], Any], method: str, path: str,
                              params: dict[str, str]) -> None:
    answers = {"/jobs": {"jobs": [job()]}, "/jobs/j1/cancel": job(state="CANCELLED"),
               "/jobs/j1/events": {"events": []},
               "/jobs/j1/logs": {"chunks": [], "cursor": 3, "done": False},
               "/nodes/n1": {"id": "n1", "name": "a", "state": "online", "keep_alive_s": 30,
                             "created_at": 1.0}}
    rec = Recorder(ok(answers[path]))
    call(client(rec))
    assert (rec.last.method, rec.last.url.path) == (method, "/api/v1" + path)
    assert dict(rec.last.url.params) == params


def test_ids_cannot_escape_the_path() -> None:
    with pytest.raises(InvalidInput):
        client(Recorder(ok({}))).job("../nodes")


def test_enrollment_and_offers_bodies() -> None:
    rec = Recorder(ok({"token": "enr", "expires_at": 5.0}))
    assert client(rec).create_enrollment("gpu-box", expires_in_s=60).token == "enr"
    assert json.loads(rec.bodies[-1]) == {"name": "gpu-box", "expires_in_s": 60}
    rec = Recorder(ok({"offers": [], "explanation": ["0 matched"]}))
    listing = client(rec).offers(Compute("h100"), limit=3, explain=True)
    assert listing.explanation == ["0 matched"]
    body = json.loads(rec.bodies[-1])
    assert (body["limit"], body["explain"], body["compute"]["gpu"]["count"]) == (3, True, 1)


@pytest.mark.parametrize("url", [URL, URL + "/api/v1"])
def test_health_is_at_the_root(url: str) -> None:
    rec = Recorder(ok({"ok": True}))
    assert client(rec, url).health() is True
    assert str(rec.last.url) == f"{URL}/healthz"
    assert client(Recorder(ok({"ok": False}))).health() is False


@pytest.mark.parametrize(("status", "kind", "exit_code"), [
    (401, Unauthorized, 2), (403, Forbidden, 2), (404, NotFound, 1), (409, Conflict, 1),
    (413, TooLarge, 2), (422, InvalidInput, 2), (418, ApiError, 1), (500, ServerError, 1),
    (503, ServerError, 1),
])
def test_error_statuses(status: int, kind: type[Exception], exit_code: int) -> None:
    rec = Recorder(ok({"error": "nope", "field": None, "hint": None}, status))
    with pytest.raises(kind) as caught:
        client(rec).job("j1")
    assert isinstance(caught.value, ApiError)
    assert caught.value.status == status
    assert caught.value.exit_code == exit_code
    assert "nope" in str(caught.value)


def test_422_keeps_field_and_hint() -> None:
    body = {"error": "unknown GPU 'a1000'", "field": "compute.gpu", "hint": "did you mean a100?"}
    with pytest.raises(InvalidInput) as caught:
        client(Recorder(ok(body, 422))).submit(JobSpec(command=["x"]))
    assert caught.value.field == "compute.gpu"
    assert caught.value.hint == "did you mean a100?"
    assert str(caught.value) == "compute.gpu: unknown GPU 'a1000' — did you mean a100?"


def test_401_hint_says_how_to_fix() -> None:
    with pytest.raises(Unauthorized, match="bourse login"):
        client(Recorder(ok({"error": "bad token"}, 401))).jobs()


def test_non_json_error_body() -> None:
    rec = Recorder(httpx.Response(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(ServerError, match="Bad Gateway"):
        client(rec).jobs()


def test_unreadable_success_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="JobDetail"):
        client(Recorder(ok({"id": "j1"}))).job("j1")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_says_start_one() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with Client(url, TOKEN, timeout=5) as real, pytest.raises(Unreachable) as caught:
        real.jobs()
    text = str(caught.value)
    assert f"cannot reach the exchange at {url}" in text
    assert "bourse up" in text
    assert caught.value.exit_code == 1


def test_bundle_exists_reads_head() -> None:
    sha = "ab" * 32
    rec = Recorder(httpx.Response(200), httpx.Response(404))
    c = client(rec)
    assert c.bundle_exists(sha) is True
    assert c.bundle_exists(sha) is False
    assert (rec.last.method, rec.last.url.path) == ("HEAD", f"/api/v1/bundles/{sha}")
    with pytest.raises(Unauthorized):
        client(Recorder(httpx.Response(401))).bundle_exists(sha)


class PartsTransport(httpx.BaseTransport):
    """Records an upload's body part by part, as a server's socket would receive it."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.request: httpx.Request | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.request = request
        self.parts = list(request.stream)  # type: ignore[arg-type]
        sha = request.url.path.rsplit("/", 1)[-1]
        return ok({"sha256": sha, "size": sum(map(len, self.parts))}, 201)


def test_upload_streams_a_file(tmp_path: Path) -> None:
    sha, data = "cd" * 32, b"x" * (3 * 1024 * 1024 + 5)
    path = tmp_path / "b.tar.gz"
    path.write_bytes(data)
    transport = PartsTransport()
    stored = Client(URL, TOKEN, transport=transport).upload_bundle(path, sha)
    assert (stored.sha256, stored.size) == (sha, len(data))
    request = transport.request
    assert request is not None
    assert (request.method, request.url.path) == ("PUT", f"/api/v1/bundles/{sha}")
    assert request.headers["content-type"] == "application/octet-stream"
    assert request.headers["content-length"] == str(len(data))
    assert len(transport.parts) == 4  # 1 MiB at a time, never one 3 MiB buffer
    assert b"".join(transport.parts) == data


def test_upload_reports_progress_as_parts_are_sent(tmp_path: Path) -> None:
    sha, data = "cd" * 32, b"x" * (2 * 1024 * 1024 + 5)
    path = tmp_path / "b.tar.gz"
    path.write_bytes(data)
    seen: list[tuple[int, int]] = []
    Client(URL, TOKEN, transport=PartsTransport()).upload_bundle(
        path, sha, progress=lambda done, total: seen.append((done, total)))
    mib = 1024 * 1024
    assert seen == [(mib, len(data)), (2 * mib, len(data)), (len(data), len(data))]


def test_ensure_bundle_skips_known_content() -> None:
    sha = "ef" * 32
    rec = Recorder(httpx.Response(200))
    assert client(rec).ensure_bundle(b"abc", sha) is False
    assert [r.method for r in rec.requests] == ["HEAD"]
    rec = Recorder(httpx.Response(404), ok({"sha256": sha, "size": 3}, 201))
    assert client(rec).ensure_bundle(b"abc", sha) is True
    assert [r.method for r in rec.requests] == ["HEAD", "PUT"]
    assert rec.bodies[-1] == b"abc"


def test_bad_sha_is_refused_before_sending() -> None:
    with pytest.raises(InvalidInput, match="SHA-256"):
        client(Recorder(ok({}))).bundle_exists("ABC")


def test_iter_logs_pages_until_done() -> None:
    rec = Recorder(ok({"chunks": [chunk(1, "a"), chunk(2, "b")], "cursor": 2, "done": False}),
                   ok({"chunks": [chunk(3, "c")], "cursor": 3, "done": True}))
    cursors = [c.cursor for c in client(rec).iter_logs("j1")]
    assert cursors == [1, 2, 3]
    assert [r.url.params["after"] for r in rec.requests] == ["0", "2"]


def test_iter_logs_of_one_member_asks_for_its_rank_on_every_page() -> None:
    rec = Recorder(ok({"chunks": [chunk(2, "a", rank=1)], "cursor": 5, "done": False}),
                   ok({"chunks": [], "cursor": 5, "done": True}))
    assert [c.rank for c in client(rec).iter_logs("j1", rank=1)] == [1]
    assert [dict(r.url.params) for r in rec.requests] == [
        {"after": "0", "limit": "1000", "rank": "1"}, {"after": "5", "limit": "1000", "rank": "1"}]


def test_iter_logs_stops_on_an_empty_page_of_a_running_job() -> None:
    rec = Recorder(ok({"chunks": [], "cursor": 0, "done": False}))
    assert list(client(rec).iter_logs("j1")) == []


def test_wait_polls_until_the_job_ends() -> None:
    rec = Recorder(ok(job(state="PENDING")), ok(job(state="RUNNING")),
                   ok(job(state="SUCCEEDED", exit_code=0)))
    assert client(rec).wait("j1", poll_s=0).state == "SUCCEEDED"
    assert len(rec.requests) == 3


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "CANCELLED"])
def test_wait_ends_at_every_terminal_state(state: str) -> None:
    rec = Recorder(ok(job(state="STARTING")), ok(job(state=state)))
    assert client(rec).wait("j1", poll_s=0).state is JobState(state)
    assert len(rec.requests) == 2


def test_states_arrive_as_the_core_enums_and_leave_as_their_strings() -> None:
    attempt = {"number": 1, "node_id": "n1", "state": "PREEMPTED", "placed_at": 1000.0}
    node = {"id": "n1", "name": "a", "state": "reclaimed", "keep_alive_s": 20.0,
            "created_at": 1000.0}
    view = client(Recorder(ok(job(state="RUNNING", attempts=[attempt])))).job("j1")
    [listed] = client(Recorder(ok({"nodes": [node]}))).nodes()
    assert view.state is JobState.RUNNING and view.attempts[0].state is AttemptState.PREEMPTED
    assert listed.state is NodeState.RECLAIMED
    assert view.state == "RUNNING" and not core.is_terminal(view)  # equal to its string
    dumped = view.model_dump(mode="json")
    assert (dumped["state"], dumped["attempts"][0]["state"]) == ("RUNNING", "PREEMPTED")
    assert type(dumped["state"]) is str and type(listed.model_dump(mode="json")["state"]) is str
    assert json.loads(view.model_dump_json())["state"] == "RUNNING"


def test_wait_times_out() -> None:
    with pytest.raises(WaitTimeout, match="still RUNNING"):
        client(Recorder(ok(job(state="RUNNING")))).wait("j1", poll_s=0, timeout_s=0)


def test_client_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_URL", "http://from-env:1")
    monkeypatch.setenv("BOURSE_TOKEN", "env-token")
    rec = Recorder(ok({"jobs": []}))
    with Client(transport=httpx.MockTransport(rec)) as c:
        c.jobs()
    assert rec.last.url.host == "from-env"
    assert rec.last.headers["authorization"] == "Bearer env-token"
