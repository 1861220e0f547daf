"""The ``exchange`` fixture: the CLI's client seam pointed at an in-memory fake exchange."""

from __future__ import annotations

import httpx
import pytest
from cli_exchange import TOKEN, URL, FakeExchange

from bourse.cli import client as seam
from bourse.sdk.client import Client


@pytest.fixture
def exchange(monkeypatch: pytest.MonkeyPatch) -> FakeExchange:
    fake = FakeExchange()
    monkeypatch.setenv("BOURSE_URL", URL)
    monkeypatch.setenv("BOURSE_TOKEN", TOKEN)

    def open_client(timeout: float = 30.0) -> Client:
        client = Client(transport=httpx.MockTransport(fake))
        client.reconnect_delays = (0.0,)
        return client

    monkeypatch.setattr(seam, "open_client", open_client)
    return fake
