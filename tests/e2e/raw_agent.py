"""A hand-driven agent connection: a real WebSocket, with a real node credential, that sends
whatever frame a test writes — valid, malformed, or hostile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from bourse.sdk.client import Client

RECV_TIMEOUT_S = 10.0
CAPABILITIES = {"hostname": "raw", "cpus": 0, "memory_gib": 0, "disk_free_gib": 0}  # no room


def enroll(client: Client, name: str) -> str:
    """A node credential for a new node, from the enrolment endpoint itself."""
    token = client.create_enrollment(name=name).token
    response = httpx.post(f"{client.url}/api/v1/agent/enroll", json={"name": name},
                          headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert response.status_code == 201, response.text
    return str(response.json()["credential"])


def open_socket(url: str, credential: str) -> ClientConnection:
    ws_url = url.replace("http://", "ws://", 1) + "/api/v1/agent/ws"
    return connect(ws_url, additional_headers={"Authorization": f"Bearer {credential}"},
                   max_size=None, open_timeout=10, proxy=None)


def frame(kind: str, body: dict[str, Any], msg_id: str = "raw-1") -> str:
    return json.dumps({"v": 1, "id": msg_id, "type": kind, "body": body})


def hello(running: list[dict[str, Any]] | None = None) -> str:
    return frame("hello", {"name": "raw", "capabilities": CAPABILITIES,
                           "running": running or [], "keep_alive_s": 60})


def receive(ws: ClientConnection) -> dict[str, Any]:
    """The next frame, parsed."""
    return dict(json.loads(ws.recv(timeout=RECV_TIMEOUT_S)))


def receive_type(ws: ClientConnection, kind: str) -> dict[str, Any]:
    """The next frame of type ``kind``, skipping others."""
    while (got := receive(ws))["type"] != kind:
        pass
    return got


@contextmanager
def welcomed(url: str, credential: str) -> Iterator[ClientConnection]:
    """A connection past a valid hello."""
    with open_socket(url, credential) as ws:
        ws.send(hello())
        receive_type(ws, "welcome")
        yield ws


def close_code(ws: ClientConnection) -> int | None:
    """How the coordinator closed the connection (frames before the close are skipped);
    AssertionError if it stays open."""
    try:
        while True:
            ws.recv(timeout=RECV_TIMEOUT_S)
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd is not None else None
    except TimeoutError:
        raise AssertionError(f"the coordinator kept the connection open for "
                             f"{RECV_TIMEOUT_S:.0f} s") from None
