"""Streams over the agent channel: proxied connections to a job's ports and ``bourse exec``.

A stream is a byte pipe between the coordinator and a node, multiplexed on the agent's one
WebSocket by a stream id the coordinator picks. Unlike the rest of the channel, stream frames
are neither acknowledged nor spooled: a stream lives only as long as the connection that
carries it, and both ends drop every stream when it ends.

- ``stream_open`` (coordinator -> agent): connect to ``127.0.0.1:<port>`` of a job the node
  runs, the port being one the job declared; or run a command beside the job (``exec``).
- ``stream_opened`` (agent -> coordinator): the target is connected (or the process started).
- ``stream_data`` (both ways): bytes, base64; ``fd`` says stdout (1) or stderr (2) for exec
  output; ``eof`` half-closes the sender's direction (stdin's end, a socket's write side).
- ``stream_window`` (both ways): the receiver has consumed ``bytes`` more; the sender may send
  that much more. Each end starts with ``WINDOW`` bytes of credit per stream and may never have
  more unacknowledged bytes in flight, so neither end buffers more than ``WINDOW`` per stream
  however fast the other side produces (a sender out of credit stops reading its socket or pipe,
  which pushes back on the server or process that writes).
- ``stream_resize`` (coordinator -> agent): an exec's terminal changed size.
- ``stream_close`` (both ways): the stream ended; ``error`` says why when it failed, and for an
  exec ``exit_code`` is the command's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from bourse.protocol.common import JobId, Wire

WINDOW = 256 * 1024  # bytes in flight per stream and direction
CHUNK = 64 * 1024  # the most data one frame carries
MAX_STREAMS = 64  # open streams per node
MAX_STREAM_ID = 2**53  # JSON-safe
MAX_ARGV = 256
StreamId = int


class PortTarget(Wire):
    kind: Literal["port"] = "port"
    port: int = Field(ge=1024, le=65535)


class ExecTarget(Wire):
    """A command run beside the job, in its work dir and environment. An empty ``argv`` means
    the node's login shell. ``tty``: on a pseudo-terminal of ``rows`` x ``cols``."""

    kind: Literal["exec"] = "exec"
    argv: list[str] = Field(default_factory=list, max_length=MAX_ARGV)
    tty: bool = False
    rows: int = Field(default=24, ge=1, le=10_000)
    cols: int = Field(default=80, ge=1, le=10_000)

    @model_validator(mode="after")
    def _no_nul(self) -> ExecTarget:
        if any("\x00" in a or len(a) > 65536 for a in self.argv):
            raise ValueError("argv entries must be under 64 KiB and hold no NUL byte")
        return self


class StreamOpen(Wire):
    stream: StreamId = Field(ge=1, le=MAX_STREAM_ID)
    job_id: JobId
    attempt: int = Field(ge=1)
    target: PortTarget | ExecTarget = Field(discriminator="kind")


class StreamOpened(Wire):
    stream: StreamId = Field(ge=1, le=MAX_STREAM_ID)


class StreamData(Wire):
    stream: StreamId = Field(ge=1, le=MAX_STREAM_ID)
    # base64, checked where it is decoded (``tunnel.stream``: strict, or the stream is reset)
    data: str = Field(default="", max_length=CHUNK * 4 // 3 + 4)
    fd: Literal[0, 1, 2] = 1
    eof: bool = False


class StreamWindow(Wire):
    stream: StreamId = Field(ge=1, le=MAX_STREAM_ID)
    bytes: int = Field(ge=1, le=WINDOW)


class StreamResize(Wire):
    stream: StreamId = Field(ge=1, le=MAX_STREAM_ID)
    rows: int = Field(ge=1, le=10_000)
    cols: int = Field(ge=1, le=10_000)


class StreamClose(Wire):
    stream: StreamId = Field(ge=1, le=MAX_STREAM_ID)
    error: str | None = Field(default=None, max_length=2000)
    exit_code: int | None = Field(default=None, ge=-255, le=511)


STREAM_MESSAGES = (StreamOpen, StreamOpened, StreamData, StreamWindow, StreamResize,
                   StreamClose)
STREAMS_FEATURE = "streams"  # in Hello.features: this agent speaks the messages above
