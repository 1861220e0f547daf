"""The coordinator's side of the log rate limit: a defence against an agent that ignores it.

Agents drop what a job prints past its limit (``bourse.agent.tailer``). The coordinator does
not trust them to: it counts what each attempt has sent since this coordinator started and
stores nothing past ``2 x burst + rate x seconds since the attempt was placed``
(:meth:`LogLimit.allowance` plus one more burst for chunks re-sent after reconnects), which an
agent keeping to the limit never reaches. A dropped chunk is acknowledged (the agent must not
re-send it); the next chunk of that stream that is stored starts with the marker line, and the
job's timeline says once that its agent went past the limit.

The counts live in memory: a restarted coordinator starts them again from zero, which only
errs on the lenient side, and they are forgotten past ``MAX_ATTEMPTS`` attempts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bourse.core.ratelimit import LogLimit

MAX_ATTEMPTS = 10_000
Key = tuple[str, int]  # job id, attempt


@dataclass
class _Count:
    sent: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # per stream, not yet marked
    warned: bool = False


class LogMeter:
    def __init__(self, limit: LogLimit) -> None:
        self.limit = limit
        self._counts: dict[Key, _Count] = {}
        self.newly_limited: list[Key] = []  # attempts that went past it in this batch

    def admit(self, key: Key, stream: str, data: bytes, placed: float, now: float) -> bytes | None:
        """What to store of a chunk: None when it is dropped, else its bytes, after the marker
        of what was dropped before it."""
        if not self.limit.enabled:
            return data
        count = self._count(key)
        count.sent += len(data)
        if count.sent > self.limit.allowance(now - placed) + self.limit.burst:
            count.dropped[stream] = count.dropped.get(stream, 0) + len(data)
            if not count.warned:
                count.warned = True
                self.newly_limited.append(key)
            return None
        dropped = count.dropped.pop(stream, 0)
        return self.limit.marker(dropped) + data if dropped else data

    def _count(self, key: Key) -> _Count:
        count = self._counts.get(key)
        if count is None:
            if len(self._counts) >= MAX_ATTEMPTS:
                self._counts.clear()
            count = self._counts[key] = _Count()
        return count

    def take_limited(self) -> list[Key]:
        found, self.newly_limited = self.newly_limited, []
        return found
