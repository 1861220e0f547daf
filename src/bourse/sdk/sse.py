"""Server-Sent Events, and following a job's log stream over them (I/O-free).

:class:`SseParser` implements the WHATWG "event stream interpretation" for one line at a time;
:class:`LogFollower` turns the events of ``GET /jobs/{id}/logs/follow`` into log chunks and job
views and remembers the cursor to reconnect from. The clients own the sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from bourse.protocol.api import JobView, LogChunkView
from bourse.sdk.errors import ProtocolError

FollowItem = LogChunkView | JobView


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: str | None = None


class SseParser:
    """Feed lines without their terminator; a blank line dispatches the pending event."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # "retry" and unknown fields are ignored

    def _dispatch(self) -> SseEvent | None:
        event, data = self._event or "message", self._data
        self._event, self._data = "", []
        if not data:
            return None  # the spec drops events with no data
        return SseEvent(event=event, data="\n".join(data), id=self._id)


class LogFollower:
    """The state of one follow: the gang member it follows (None: every member), the cursor
    to resume from and whether ``end`` arrived."""

    def __init__(self, after: int = 0, rank: int | None = None) -> None:
        self.cursor = after
        self.rank = rank
        self.done = False
        self.received = 0  # lines read, keep-alives included: a sign the stream is alive
        self._parser = SseParser()

    def reconnected(self) -> None:
        """Forget a half-received event: the next connection starts a fresh stream."""
        self._parser = SseParser()

    def feed(self, line: str) -> FollowItem | None:
        self.received += 1
        event = self._parser.feed(line)
        return None if event is None or self.done else self._apply(event)

    def _apply(self, event: SseEvent) -> FollowItem | None:
        try:
            if event.event == "chunk":
                chunk = LogChunkView.model_validate_json(event.data)
                if chunk.cursor <= self.cursor:
                    return None  # already seen before a reconnect
                self.cursor = chunk.cursor
                return chunk
            if event.event in ("job", "end"):
                self.done = event.event == "end"
                return JobView.model_validate_json(event.data)
        except ValidationError as exc:
            raise ProtocolError(f"unreadable {event.event!r} event from the exchange: "
                                f"{exc.errors()[0]['msg']}") from exc
        return None  # an event type from a newer server
