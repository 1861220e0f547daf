"""The node's half of the loss window (``core.liveness``): a lease that every attempt's
supervisor checks, so an attempt cut off from the coordinator stops itself before the exchange
may place it elsewhere — whether its agent is alive but cut off, or dead.

The lease is one file per node whose modification time is when it runs out. The agent moves
it forward each time the coordinator acknowledges a heartbeat (counted from when that heartbeat
was sent); the shim of each attempt compares it with the time every ``check_s`` with shell
builtins only (``[ now -nt lease ]``), and on expiry SIGTERMs the attempt's process group,
then SIGKILLs it ``grace_s`` later (``agent.shim``). No lease file, no fencing: that is an
older coordinator, which does not say its loss window.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from bourse.core.liveness import Fence

log = logging.getLogger(__name__)
FENCED_REASON = ("stopped itself: no word from the coordinator for nearly the loss window, "
                 "after which the exchange may run it elsewhere")


class Lease:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fence: Fence | None = None
        self.until = 0.0

    def arm(self, window_s: float | None, heard_at: float) -> None:
        """A coordinator welcomed the node (its hello was sent at ``heard_at``) and said its
        loss window; None: it does not fence, and neither does the node."""
        if window_s is None:
            self.fence, self.until = None, 0.0
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        self.fence = Fence.within(window_s)
        self.renew(heard_at)

    def renew(self, heard_at: float) -> None:
        """The coordinator heard from the node at ``heard_at`` (or later)."""
        if self.fence is None:
            return
        until = self.fence.lease_until(heard_at)
        if until <= self.until:
            return
        self.until = until
        self.path.touch(exist_ok=True)
        os.utime(self.path, (until, until))

    def shim_args(self) -> tuple[str, str, str]:
        """(lease file, check every, grace) for a new attempt's shim; empty: no fencing."""
        if self.fence is None:
            return ("", "", "")
        return (str(self.path), f"{self.fence.check_s:g}", f"{self.fence.grace_s:g}")

