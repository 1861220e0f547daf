"""A local EC2 instance metadata service (IMDSv2), as far as the spot notice goes.

``PUT /latest/api/token`` with ``X-aws-ec2-metadata-token-ttl-seconds`` (1 to 21600, else 400)
gives a token valid that long; every ``GET`` needs a valid ``X-aws-ec2-metadata-token`` or is
refused with 401, as the real service refuses IMDSv1 reads when v2 is required.
``/latest/meta-data/spot/instance-action`` is 404 until :meth:`ImdsStub.notice`, then the
notice's JSON. It runs on a thread of the test process, on 127.0.0.1 unless told another
address; agents in other processes reach it by :attr:`url` (``--metadata-url``).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN_PATH = "/latest/api/token"
ACTION_PATH = "/latest/meta-data/spot/instance-action"


class ImdsStub:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.tokens: dict[str, float] = {}  # token -> expires at
        self.body: str | None = None  # the instance-action answer; None: 404
        self.status = 200  # what a notice is served with (a broken service: 500)
        self.puts = self.gets = self.refused = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, 0), _handler(self))
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="imds-stub")
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def notice(self, action: str = "terminate", at: float | None = None) -> float:
        """Serve an interruption notice: the machine goes at ``at`` (default: in 2 minutes,
        as EC2 gives); returns it, rounded to the second as EC2 writes it."""
        when = int(time.time() + 120 if at is None else at)
        stamp = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.body = json.dumps({"action": action, "time": stamp})
        return float(when)

    def clear(self) -> None:
        self.body = None

    def forget_tokens(self) -> None:
        """As after the service restarted: every token it gave is refused from now on."""
        with self.lock:
            self.tokens.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def give_token(self, ttl: str | None) -> tuple[int, str]:
        if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return 400, ""
        token = secrets.token_urlsafe(32)
        with self.lock:
            self.puts += 1
            self.tokens[token] = time.time() + int(ttl)
        return 200, token

    def read(self, path: str, token: str | None) -> tuple[int, str]:
        with self.lock:
            self.gets += 1
            if token is None or self.tokens.get(token, 0.0) < time.time():
                self.refused += 1
                return 401, ""
        if path != ACTION_PATH or self.body is None:
            return 404, "Not Found"
        return self.status, self.body


def _handler(stub: ImdsStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            if self.path != TOKEN_PATH:
                self._answer(403, "")
                return
            self._answer(*stub.give_token(self.headers.get(
                "X-aws-ec2-metadata-token-ttl-seconds")))

        def do_GET(self) -> None:
            self._answer(*stub.read(self.path, self.headers.get("X-aws-ec2-metadata-token")))

        def _answer(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    return Handler
