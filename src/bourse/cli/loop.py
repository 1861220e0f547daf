"""The event loop the long-running commands (the coordinator, the agent) run on: uvloop where it
is installed (a dependency everywhere but Windows), else asyncio's own.

uvloop cut the coordinator's CPU per job by about a fifth in ``benchmarks/throughput.py``
(docs/exchange.md). ``BOURSE_EVENT_LOOP=asyncio`` runs on asyncio's loop instead, to compare
or to rule the loop out when chasing a problem.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from bourse.core.errors import InvalidInput

T = TypeVar("T")
CHOICES = ("uvloop", "asyncio")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's default loop."""
    choice = os.environ.get("BOURSE_EVENT_LOOP", "uvloop")
    if choice not in CHOICES:
        raise InvalidInput(f"BOURSE_EVENT_LOOP={choice!r} is not an event loop bourse knows",
                           field="BOURSE_EVENT_LOOP", hint=f"use one of {', '.join(CHOICES)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # not installed on this platform
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the chosen loop."""
    try:
        factory = loop_factory()
    except InvalidInput:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
