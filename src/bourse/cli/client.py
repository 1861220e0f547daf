"""The CLI's one client seam: every command gets its client here (tests replace it to hand
back a client on a mock transport or an in-process exchange)."""

from __future__ import annotations

from bourse.sdk.client import Client


def open_client(timeout: float = 30.0) -> Client:
    """The client every command uses (from BOURSE_URL/BOURSE_TOKEN or the credentials file);
    shell completion asks with a short ``timeout``.

    The one seam of the CLI: tests replace it to hand back a client on a mock transport.
    """
    return Client(timeout=timeout)
