"""An HTTP proxy in front of the AWS simulator that answers chosen calls with AWS's own
error responses, so boto3 raises the real ``ClientError`` (code, message, HTTP status).

Rules come from a scenario (a JSON list): each matches a call by action (``RunInstances``:
the form's ``Action``, or the JSON protocol's ``X-Amz-Target``), service and region (the
request's SigV4 credential scope), and for launches by zone name, instance type and market
(``spot``/``on-demand``); ``times`` is how many matching calls it fails (absent: all of them).
Every call the proxy sees is recorded, so a test can count what a client sent.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

SCENARIOS = Path(__file__).parent / "scenarios"
_SCOPE = re.compile(r"Credential=[^/]+/\d+/([^/]+)/([^/]+)/aws4_request")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}
_OWN = _HOP | {"server", "date"}  # the proxy's own response sends these


@dataclass(frozen=True)
class Call:
    """One request the proxy saw."""

    service: str
    region: str
    action: str
    params: Mapping[str, str]

    @property
    def zone(self) -> str | None:
        return self.params.get("Placement.AvailabilityZone")

    @property
    def instance_type(self) -> str | None:
        return self.params.get("InstanceType")

    @property
    def market(self) -> str:
        return "spot" if self.params.get("InstanceMarketOptions.MarketType") == "spot" \
            else "on-demand"


@dataclass
class Rule:
    """Fail matching calls with ``error`` (``code``, ``message``, ``status``)."""

    error: Mapping[str, Any]
    action: str | None = None
    service: str | None = None
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    market: str | None = None
    times: int | None = None
    name: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)  # what a test expects, unread here

    def matches(self, call: Call) -> bool:
        wanted = {"action": self.action, "service": self.service, "region": self.region,
                  "zone": self.zone, "instance_type": self.instance_type,
                  "market": self.market}
        return all(value is None or getattr(call, key) == value
                   for key, value in wanted.items())

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Rule:
        known = {k: data[k] for k in ("error", "action", "service", "region", "zone",
                                      "instance_type", "market", "times", "name") if k in data}
        return cls(**known, extra={k: v for k, v in data.items() if k not in known})


def load(name: str) -> list[Rule]:
    """The rules of a scenario file in ``scenarios/``."""
    return [Rule.of(item) for item in json.loads((SCENARIOS / name).read_text())]


def _xml_error(service: str, code: str, message: str) -> tuple[str, bytes]:
    request_id = str(uuid.uuid4())
    inner = f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
    if service == "ec2":
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>{inner}'
                f"</Error></Errors><RequestID>{request_id}</RequestID></Response>")
    else:  # the other query-protocol services (STS, IAM)
        body = (f"<ErrorResponse><Error><Type>Sender</Type>{inner}</Error>"
                f"<RequestId>{request_id}</RequestId></ErrorResponse>")
    return "text/xml", body.encode()


def error_body(service: str, json_protocol: bool, code: str,
               message: str) -> tuple[str, bytes]:
    """(content type, body) of an AWS error response as the service's protocol has it."""
    if json_protocol:
        return "application/x-amz-json-1.1", json.dumps(
            {"__type": code, "message": message}).encode()
    return _xml_error(service, code, message)


class FaultProxy:
    """The proxy; ``url`` is the endpoint a client is given. Start with :meth:`start`."""

    def __init__(self, upstream: str, rules: Iterable[Rule] = ()) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rules: list[Rule] = list(rules)
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def reset(self, rules: Iterable[Rule] = ()) -> None:
        with self._lock:
            self.rules, self.calls = list(rules), []

    def count(self, action: str) -> int:
        with self._lock:
            return sum(1 for c in self.calls if c.action == action)

    def fault(self, call: Call) -> Rule | None:
        """Record ``call`` and return the rule that fails it, if any (using one of its
        ``times``)."""
        with self._lock:
            self.calls.append(call)
            for rule in self.rules:
                if rule.matches(call) and (rule.times is None or rule.times > 0):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule
        return None


def _call(headers: Mapping[str, str], body: bytes) -> tuple[Call, bool]:
    """The call a request makes, and whether it speaks the JSON protocol."""
    scope = _SCOPE.search(headers.get("Authorization", ""))
    region, service = scope.groups() if scope else ("", "")
    target = headers.get("X-Amz-Target")
    if target:
        return Call(service, region, target.rsplit(".", 1)[-1], {}), True
    params = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return Call(service, region, params.get("Action", ""), params), False


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go in two writes

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            call, json_protocol = _call(dict(self.headers.items()), body)
            rule = proxy.fault(call)
            if rule is not None:
                kind, payload = error_body(call.service, json_protocol, rule.error["code"],
                                           rule.error["message"])
                self._answer(int(rule.error.get("status", 400)), [("Content-Type", kind)],
                             payload)
                return
            status, headers, payload = self._upstream(body)
            self._answer(status, headers, payload)

        def _upstream(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
            try:
                conn.request(self.command, self.path, body=body,
                             headers={k: v for k, v in self.headers.items()
                                      if k.lower() not in _HOP})
                reply = conn.getresponse()
                return reply.status, reply.getheaders(), reply.read()
            finally:
                conn.close()

        def _answer(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
            self.send_response(status)
            for key, value in headers:
                if key.lower() not in _OWN:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = _relay

    return Handler
