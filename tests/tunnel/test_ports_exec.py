"""Ports and exec end to end: a real coordinator and agent as processes, a job running an HTTP
server and a WebSocket echo server on declared ports, reached through the coordinator; and
`bourse exec` (pipes and a pseudo-terminal) in that running job."""

from __future__ import annotations

import asyncio
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import websockets
from servers import SERVERS
from ui_exchange import UiExchange, _free_port, wait_for

from bourse.core.compute import Compute
from bourse.protocol.common import JobSpec, Port
from bourse.protocol.stream import MAX_STREAMS

pytestmark = pytest.mark.slow


class Served:
    def __init__(self, exchange: UiExchange) -> None:
        self.exchange = exchange
        self.http_port, self.ws_port = _free_port(), _free_port()
        spec = JobSpec(command=[sys.executable, "-c", SERVERS, str(self.http_port),
                                str(self.ws_port)], name="servers", max_retries=0,
                       compute=Compute(cpus=0.5),
                       ports=[Port(number=self.http_port),
                              Port(number=self.ws_port, path="keep")])
        self.job_id = exchange.client.submit(spec).id
        exchange.wait_state(self.job_id, "RUNNING", timeout=60)
        wait_for(self._ready, 30, "the job's servers", exchange.logs)

    def _ready(self) -> bool:
        logs = self.exchange.client.logs(self.job_id)
        return any("cmVhZHk" in c.data for c in logs.chunks)  # base64 of "ready"

    def url(self, port: int, path: str = "/") -> str:
        return f"{self.exchange.url}/jobs/{self.job_id}/ports/{port}{path}"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.exchange.token}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    exchange = UiExchange(tmp_path_factory.mktemp("tunnel")).start()
    try:
        yield Served(exchange)
    finally:
        exchange.close()


def test_http_reaches_the_jobs_server_through_the_coordinator(served: Served) -> None:
    got = httpx.get(served.url(served.http_port, "/hello.txt"), headers=served.auth)
    assert (got.status_code, got.text) == (200, "hello from the job\n")
    echo = httpx.post(served.url(served.http_port, "/echo?x=1"), headers={
        **served.auth, "Cookie": "bourse_session=secret; theme=dark"}, content=b"z" * 300_000)
    answer = echo.json()
    escaped = httpx.get(served.url(served.http_port, "/echo/a%20b%2Fc"), headers=served.auth)
    assert escaped.json()["path"] == "/echo/a%20b%2Fc"  # forwarded as sent
    assert (answer["path"], answer["body"]) == ("/echo?x=1", 300_000)
    seen = {k.lower(): v for k, v in answer["headers"].items()}
    assert "authorization" not in seen  # the exchange's credentials never reach the job
    assert seen["cookie"] == "theme=dark"
    assert seen["x-forwarded-prefix"] == f"/jobs/{served.job_id}/ports/{served.http_port}"
    assert echo.headers.get_list("set-cookie") == ["app=1; Path=/"]


def test_the_bare_prefix_redirects_below_it(served: Served) -> None:
    got = httpx.get(served.url(served.http_port, ""), headers=served.auth)
    assert (got.status_code, got.headers["location"]) == (
        307, f"/jobs/{served.job_id}/ports/{served.http_port}/")


def test_a_large_download_flows_through_the_windows(served: Served) -> None:
    big = served.exchange.agent_dir / "jobs" / served.job_id / "1" / "work" / "big.bin"
    big.write_bytes(os.urandom(5 * 1024 * 1024))
    got = httpx.get(served.url(served.http_port, "/big.bin"), headers=served.auth, timeout=60)
    assert got.content == big.read_bytes()


def test_a_websocket_echoes_through_the_coordinator(served: Served) -> None:
    async def talk() -> tuple[str, str, bytes]:
        url = served.url(served.ws_port, "/socket?a=b").replace("http://", "ws://")
        async with websockets.connect(url, additional_headers=served.auth,
                                      max_size=None) as ws:
            path = str(await ws.recv())
            await ws.send("hi")
            text = str(await ws.recv())
            payload = os.urandom(2 * 1024 * 1024)
            await ws.send(payload)
            back = await ws.recv()
            assert isinstance(back, bytes)
            return path, text, back if back == payload else b"mismatch"

    path, text, back = asyncio.run(talk())
    assert path == f"/jobs/{served.job_id}/ports/{served.ws_port}/socket?a=b"  # a `keep` port
    assert text == "hi"
    assert back != b"mismatch"


def test_a_node_carries_a_bounded_number_of_streams(served: Served) -> None:
    """MAX_STREAMS WebSockets held open through the proxy: one more HTTP request, and one more
    WebSocket handshake, are answered 429 with Retry-After, `bourse exec` says why it cannot;
    all work again once the others close."""

    async def scenario() -> tuple[int, str, str, int, int]:
        url = served.url(served.ws_port, "/held").replace("http://", "ws://")
        held = [await websockets.connect(url, additional_headers=served.auth)
                for _ in range(MAX_STREAMS)]
        try:
            for ws in held:
                await ws.recv()  # the path: the stream is open end to end
            async with httpx.AsyncClient(headers=served.auth) as client:
                busy = await client.get(served.url(served.http_port, "/hello.txt"))
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(url, additional_headers=served.auth)
            code = refused.value.response.status_code
            execed = await asyncio.to_thread(_bourse, served, "exec", served.job_id, "--", "pwd")
            assert execed.returncode == 1
            assert f"already carries {MAX_STREAMS} streams".encode() in execed.stderr
        finally:
            for ws in held:
                await ws.close()
        await asyncio.sleep(0.5)  # the streams' closes reach the node and come back
        async with httpx.AsyncClient(headers=served.auth) as client:
            again = await client.get(served.url(served.http_port, "/hello.txt"))
        return (busy.status_code, busy.headers.get("retry-after", ""), busy.json()["error"],
                code, again.status_code)

    status, retry_after, error, code, again = asyncio.run(scenario())
    assert (status, retry_after) == (429, "5")
    assert f"already carries {MAX_STREAMS} streams" in error
    assert code == 429
    assert again == 200


def test_undeclared_ports_and_other_tokens_are_refused(served: Served) -> None:
    undeclared = httpx.get(served.url(_free_port()), headers=served.auth)
    assert undeclared.status_code == 404
    assert "does not declare port" in undeclared.json()["error"]
    for headers in ({}, {"Authorization": "Bearer bse_u_" + "x" * 43},
                    {"Cookie": "bourse_session=bse_u_" + "y" * 43}):
        assert httpx.get(served.url(served.http_port), headers=headers).status_code == 401
    enrolment = served.exchange.client.create_enrollment(name="other").token
    node = httpx.post(f"{served.exchange.url}/api/v1/agent/enroll", json={"name": "other"},
                      headers={"Authorization": f"Bearer {enrolment}"}).json()["credential"]
    refused = httpx.get(served.url(served.http_port),
                        headers={"Authorization": f"Bearer {node}"})
    assert refused.status_code == 401


def test_the_ui_cookie_opens_a_port_but_not_a_cross_site_websocket(served: Served) -> None:
    cookie = {"Cookie": f"bourse_session={served.exchange.token}"}
    assert httpx.get(served.url(served.http_port, "/hello.txt"), headers=cookie).status_code \
        == 200

    async def cross_site() -> None:
        url = served.url(served.ws_port, "/").replace("http://", "ws://")
        async with websockets.connect(url, additional_headers={
                **cookie, "Origin": "http://evil.example"}):
            pass

    with pytest.raises(websockets.InvalidStatus):
        asyncio.run(cross_site())


def _bourse(served: Served, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "BOURSE_URL": served.exchange.url, "BOURSE_TOKEN": served.exchange.token}
    return subprocess.run([sys.executable, "-m", "bourse", *args], input=stdin, env=env,
                          capture_output=True, timeout=60, check=False)


def _work_dir(served: Served) -> Path:
    return (served.exchange.agent_dir / "jobs" / served.job_id / "1" / "work").resolve()


def test_exec_runs_beside_the_job_in_its_work_dir(served: Served) -> None:
    pwd = _bourse(served, "exec", served.job_id, "--", "pwd")
    assert (pwd.returncode, pwd.stdout.decode().strip()) == (0, str(_work_dir(served))), \
        pwd.stderr
    piped = _bourse(served, "exec", served.job_id, "--", "sh", "-c",
                    "cat; echo oops >&2; exit 3", stdin=b"from stdin\n")
    assert (piped.returncode, piped.stdout, piped.stderr) == (3, b"from stdin\n", b"oops\n")
    ls = _bourse(served, "exec", served.job_id, "--", "ls")
    assert "hello.txt" in ls.stdout.decode()
    script = _bourse(served, "exec", served.job_id, stdin=b"echo $BOURSE_JOB_ID; exit 7\n")
    assert (script.returncode, script.stdout) == (7, f"{served.job_id}\n".encode())
    execs = [(r.outcome, r.params.get("argv")) for r in served.exchange.client.audit().records
             if r.action == "exec" and r.target == f"/api/v1/jobs/{served.job_id}/exec"]
    assert ("started", ["pwd"]) in execs and ("ended", ["pwd"]) in execs  # the audit trail


def test_exec_refuses_a_job_that_is_not_running_and_a_bad_token(served: Served) -> None:
    done = served.exchange.submit("print('done')", "short")
    served.exchange.wait_state(done.id, "SUCCEEDED")
    refused = _bourse(served, "exec", done.id, "--", "pwd")
    assert refused.returncode == 1
    assert b"not RUNNING" in refused.stderr
    env = {**os.environ, "BOURSE_URL": served.exchange.url, "BOURSE_TOKEN": "bse_u_" + "z" * 43}
    bad = subprocess.run([sys.executable, "-m", "bourse", "exec", served.job_id, "--", "pwd"],
                         env=env, capture_output=True, timeout=60, check=False)
    assert bad.returncode != 0
    assert bad.stdout == b""


class Terminal:
    """``bourse exec`` on a pseudo-terminal of our own, driven like a person at a keyboard."""

    def __init__(self, served: Served, *args: str) -> None:
        self.master, slave = os.openpty()
        env = {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
               "BOURSE_URL": served.exchange.url, "BOURSE_TOKEN": served.exchange.token,
               "TERM": "dumb"}  # the size is the terminal's, not the variables'
        self.proc = subprocess.Popen([sys.executable, "-m", "bourse", "exec", *args],
                                     stdin=slave, stdout=slave, stderr=slave, env=env,
                                     start_new_session=True)
        os.close(slave)
        self.seen = b""

    def expect(self, text: bytes, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} not seen in {self.seen[-2000:]!r}")
            if select.select([self.master], [], [], left)[0]:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:
                    raise AssertionError(f"{text!r} not seen in {self.seen[-2000:]!r}") from None

    def expect_prompt(self) -> None:
        """A shell's prompt: root's ends with '#', anyone else's with '$'."""
        try:
            self.expect(b"#", timeout=15)
        except AssertionError:
            self.expect(b"$", timeout=1)

    def type(self, text: bytes) -> None:
        os.write(self.master, text)

    def resize(self, rows: int, cols: int) -> None:
        """What a terminal window does when dragged: a new size, and SIGWINCH (sent by hand:
        the pty is not the process's controlling terminal)."""
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.kill(self.proc.pid, signal.SIGWINCH)

    def close(self) -> int:
        code = self.proc.wait(timeout=30)
        os.close(self.master)
        return code


def test_an_interactive_python_session(served: Served) -> None:
    term = Terminal(served, "-t", served.job_id, "--", sys.executable, "-q", "-i")
    term.expect(b">>> ")
    term.type(b"import os; print(6 * 7, os.getcwd())\r")
    term.expect(f"42 {_work_dir(served)}".encode())
    term.type(b"raise SystemExit(5)\r")
    assert term.close() == 5


def test_a_window_resize_reaches_the_command(served: Served) -> None:
    term = Terminal(served, "-t", served.job_id, "--", sys.executable, "-q", "-i")
    term.expect(b">>> ")
    term.resize(50, 132)
    for attempt in range(50):  # the resize travels beside the keys, not in their order
        term.type(f"import os; print('size{attempt}', *os.get_terminal_size())\r".encode())
        term.expect(f"size{attempt} ".encode())
        term.expect(b">>> ")
        if f"size{attempt} 132 50".encode() in term.seen:
            break
        time.sleep(0.2)
    assert b" 132 50" in term.seen
    term.type(b"raise SystemExit(0)\r")
    assert term.close() == 0


def test_a_shell_on_a_terminal_by_default(served: Served) -> None:
    term = Terminal(served, served.job_id)
    term.expect_prompt()  # keys typed ahead would be flushed when raw mode starts
    term.type(b"echo $((40 + 2)); exit 4\r")
    term.expect(b"42")
    assert term.close() == 4


def test_an_exec_ends_with_its_job(served: Served) -> None:
    job = served.exchange.submit("import time; time.sleep(600)", "sleeper")
    served.exchange.wait_state(job.id, "RUNNING")
    env = {**os.environ, "BOURSE_URL": served.exchange.url, "BOURSE_TOKEN": served.exchange.token}
    execing = subprocess.Popen([sys.executable, "-m", "bourse", "exec", job.id, "--", "sh", "-c",
                                "echo started; sleep 600"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert execing.stdout is not None
    assert execing.stdout.readline() == b"started\n"
    served.exchange.client.cancel(job.id)
    _, err = execing.communicate(timeout=30)
    assert execing.returncode == 1
    assert f"job {job.id} ended".encode() in err


def test_another_project_can_neither_reach_the_port_nor_exec(served: Served) -> None:
    client = served.exchange.client
    client.create_project("elsewhere")
    other = client.create_token("elsewhere").token
    port = httpx.get(served.url(served.http_port), headers={"Authorization": f"Bearer {other}"})
    assert port.status_code == 404 and "servers" not in port.text
    env = {**os.environ, "BOURSE_URL": served.exchange.url, "BOURSE_TOKEN": other}
    refused = subprocess.run([sys.executable, "-m", "bourse", "exec", served.job_id, "--", "pwd"],
                             env=env, capture_output=True, timeout=60, check=False)
    assert refused.returncode != 0 and refused.stdout == b""
    assert b"no job" in refused.stderr
