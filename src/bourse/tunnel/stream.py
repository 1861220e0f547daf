"""One end of a stream (``bourse.protocol.stream``): reads and writes with credit-based flow
control, over a ``send`` callback that queues a message on the agent channel.

Both ends use it: the coordinator for a proxied request or an exec session, the agent for the
socket or process it feeds. Incoming data is buffered up to ``WINDOW`` bytes — a peer that sends
more than the credit it was given breaks the protocol and the stream is reset — and credit goes
back to the peer only as the reader consumes, so a fast producer waits for a slow consumer
instead of filling memory. Outgoing data waits for credit the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections import deque
from collections.abc import Callable

from bourse.protocol.common import Wire
from bourse.protocol.stream import (
    CHUNK,
    WINDOW,
    StreamClose,
    StreamData,
    StreamResize,
    StreamWindow,
)

Send = Callable[[Wire], None]
GRANT_AT = WINDOW // 4  # credit is returned in batches of at least this many bytes


class StreamClosed(Exception):
    """The stream ended (closed by either end, or its connection went away)."""


class Stream:
    def __init__(self, stream_id: int, send: Send) -> None:
        self.id, self._send = stream_id, send
        self._inbox: deque[tuple[int, bytes]] = deque()
        self._buffered = 0  # bytes received and not yet read
        self._consumed = 0  # bytes read and not yet granted back
        self._credit = WINDOW  # what we may still send
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self.peer_eof = False  # the peer will send no more data
        self.closed: StreamClose | None = None  # why it ended, once it has
        self.on_resize: Callable[[StreamResize], None] | None = None

    # --- the channel's side ----------------------------------------------------------------

    def receive(self, message: Wire) -> None:
        """A frame for this stream from the peer."""
        if isinstance(message, StreamData):
            self._receive_data(message)
        elif isinstance(message, StreamWindow):
            self._credit += message.bytes
            self._writable.set()
        elif isinstance(message, StreamResize):
            if self.on_resize is not None:
                self.on_resize(message)
        elif isinstance(message, StreamClose):
            self._ended(message)

    def _receive_data(self, message: StreamData) -> None:
        try:
            data = binascii.a2b_base64(message.data, strict_mode=True)
        except ValueError:  # binascii.Error, or a str that is not ASCII
            self.reset("the peer sent stream data that is not base64")
            return
        if self._buffered + len(data) > WINDOW:
            self.reset("the peer sent more than its flow-control window")
            return
        if data:
            self._inbox.append((message.fd, data))
            self._buffered += len(data)
        self.peer_eof = self.peer_eof or message.eof
        self._readable.set()

    def _ended(self, message: StreamClose) -> None:
        if self.closed is None:
            self.closed = message
        self._readable.set()
        self._writable.set()

    # --- the user's side -------------------------------------------------------------------

    async def read(self) -> tuple[int, bytes]:
        """The next (fd, bytes) received; (fd, b"") once the peer has finished sending."""
        while not self._inbox:
            if self.peer_eof or self.closed is not None:
                return 1, b""
            self._readable.clear()
            await self._readable.wait()
        fd, data = self._inbox.popleft()
        self._buffered -= len(data)
        self._consumed += len(data)
        if self._consumed >= GRANT_AT and self.closed is None:
            self._send(StreamWindow(stream=self.id, bytes=self._consumed))
            self._consumed = 0
        return fd, data

    async def write(self, data: bytes, fd: int = 1) -> None:
        """Send ``data``, waiting for credit; StreamClosed when the stream has ended."""
        view = memoryview(data)
        while view:
            size = await self.credit(len(view))
            self._send(StreamData(stream=self.id, data=_b64(view[:size]), fd=fd))
            self._credit -= size
            view = view[size:]

    async def credit(self, wanted: int = CHUNK) -> int:
        """How much may be sent now (at most ``wanted`` and ``CHUNK``), once there is credit."""
        while self._credit <= 0 and self.closed is None:
            self._writable.clear()
            await self._writable.wait()
        if self.closed is not None:
            raise StreamClosed(self.closed.error or "the stream was closed")
        return min(wanted, self._credit, CHUNK)

    def send(self, message: Wire) -> None:
        """A control message for the peer (a resize)."""
        if self.closed is None:
            self._send(message)

    def write_eof(self) -> None:
        if self.closed is None:
            self._send(StreamData(stream=self.id, eof=True))

    def close(self, error: str | None = None, exit_code: int | None = None) -> None:
        """End the stream and tell the peer (once)."""
        if self.closed is None:
            message = StreamClose(stream=self.id, error=error, exit_code=exit_code)
            self._send(message)
            self._ended(message)

    def reset(self, error: str) -> None:
        self.close(error=error)

    def dropped(self, reason: str) -> None:
        """The connection carrying the stream ended: nothing can be sent any more."""
        self._ended(StreamClose(stream=self.id, error=reason))


def _b64(data: memoryview) -> str:
    return base64.b64encode(data).decode("ascii")
