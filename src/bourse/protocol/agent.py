"""Messages on the agent channel (one WebSocket per agent, JSON text frames).

Every frame is an :class:`Envelope`: protocol version, a message id, a type and a body. Delivery
is at-least-once in both directions: the receiver acknowledges ids once it has durably handled
them (``ack``), the sender re-sends what was not acknowledged after a reconnect, and every
handler is idempotent — job events and log chunks carry (job, attempt, seq), which the
coordinator de-duplicates. Stream frames (``bourse.protocol.stream``: jobs' ports and exec) are
the exception: neither acknowledged nor replayed, they live and die with the connection.
Unknown fields are ignored; an unknown type is answered with an
``error``; a frame that is not valid JSON of this shape closes the connection.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from bourse.core.devices import DEVICE_ADDRESS
from bourse.protocol.common import (
    AttemptRef,
    Capabilities,
    Declared,
    JobId,
    JobSpec,
    ProbeReport,
    Wire,
    ip_literal,
)
from bourse.protocol.metrics import MAX_SAMPLES, JobSample, Sample
from bourse.protocol.stream import (
    StreamClose,
    StreamData,
    StreamOpen,
    StreamOpened,
    StreamResize,
    StreamWindow,
)
from bourse.protocol.track import TrackBatch
from bourse.protocol.version import PROTOCOL_VERSION

MAX_FRAME_BYTES = 8 * 1024 * 1024
LOG_CHUNK_BYTES = 256 * 1024
MAX_SEQ = 2**31 - 1  # sequence numbers and attempts fit a 32-bit integer column
MAX_OFFSET = 2**62


class Envelope(Wire):
    v: int = PROTOCOL_VERSION
    id: str = Field(min_length=1, max_length=128)
    type: str = Field(min_length=1, max_length=64)
    body: dict[str, Any] = Field(default_factory=dict)


# --- agent -> coordinator ---------------------------------------------------------------------

class Hello(Wire):
    name: str = Field(min_length=1, max_length=128)
    capabilities: Capabilities
    running: list[AttemptRef] = Field(default_factory=list)
    keep_alive_s: float = Field(gt=0, le=86400)
    protocol: int = PROTOCOL_VERSION
    declared: Declared | None = None  # what the provider claims the node has
    features: list[Annotated[str, Field(max_length=64)]] = Field(  # e.g. "streams"
        default_factory=list, max_length=64)
    # the node's boot and network namespace as a digest (``tunnel.loopback``): equal to the
    # coordinator's own when they share a loopback, so its gateway may reach replicas directly
    host: str | None = Field(default=None, max_length=128)


class ProbeReportMessage(Wire):
    """The agent's measurements (probe and local checks); the coordinator judges them."""

    report: ProbeReport


class Heartbeat(Wire):
    running: list[AttemptRef] = Field(default_factory=list)
    time: float


EventKind = Literal["accepted", "preparing", "started", "exited", "start_failed", "info",
                    "rendezvous"]
# in a ``start_failed`` event's data: the node, not the job, is why it could not start (a
# declared port already taken there); the coordinator places the job elsewhere, as after a
# node loss
RETRY_ELSEWHERE = "retry_elsewhere"


class JobEvent(Wire):
    """Something that happened to an attempt on the node; ``seq`` is per attempt."""

    job_id: JobId
    attempt: int = Field(ge=1, le=MAX_SEQ)
    seq: int = Field(ge=0, le=MAX_SEQ)
    kind: EventKind
    time: float
    data: dict[str, Any] = Field(default_factory=dict)


class LogChunk(Wire):
    """Bytes ``offset..offset+len`` of an attempt's stdout or stderr, base64-encoded.

    ``data`` is checked where it is decoded, once (``services.agents``: strict base64, or the
    chunk is dropped and reported): a pattern here scanned every byte a second time, as
    much CPU as the decoding itself on the coordinator's hottest path."""

    job_id: JobId
    attempt: int = Field(ge=1, le=MAX_SEQ)
    seq: int = Field(ge=0, le=MAX_SEQ)
    stream: Literal["stdout", "stderr"]
    offset: int = Field(ge=0, le=MAX_OFFSET)
    data: str = Field(max_length=LOG_CHUNK_BYTES * 2)
    time: float


class Metrics(Wire):
    """Resource samples of the running jobs and of the node. Best effort, not spooled: sent
    only to a coordinator whose ``welcome`` lists ``metrics`` in ``accepts``."""

    jobs: list[JobSample] = Field(default_factory=list, max_length=MAX_SAMPLES)
    node: Sample | None = None


class Interruption(Wire):
    """The node's cloud takes the machine back (a spot interruption notice): it goes in
    ``notice_s`` seconds. Optional: sent only to a coordinator whose ``welcome`` lists
    ``interruption`` in ``accepts``, which reclaims the node (a ``preempt`` comes back); sent
    again on each new connection until the machine goes."""

    notice_s: float = Field(ge=0, le=3600, allow_inf_nan=False)
    action: str = Field(default="terminate", min_length=1, max_length=64)  # the cloud's word
    reason: str = Field(default="spot interruption notice", max_length=500)
    # when the node stopped its jobs on the notice (its clock): they may have saved before the
    # coordinator heard (core.interruption.preempted_at bounds it)
    stopped_at: float | None = Field(default=None, allow_inf_nan=False)


class Ack(Wire):
    ids: list[str] = Field(max_length=100_000)


class Error(Wire):
    message: str
    ref: str | None = None


# --- coordinator -> agent ---------------------------------------------------------------------

class Welcome(Wire):
    node_id: str
    keep_alive_s: float
    server_time: float
    accepts: list[str] = Field(default_factory=list)  # optional message types it handles
    # after this long without being heard, the node's attempts are given up and may be placed
    # elsewhere: the agent fences them before then (``core.liveness``); None: an older
    # coordinator, which does not say
    loss_window_s: float | None = Field(default=None, gt=0, le=7 * 86400)


class StoreAccess(Wire):
    """How an attempt reaches the exchange's object store: the endpoint and credentials scoped
    to its own inputs, outputs and checkpoint (see ``bourse.storage.credentials``)."""

    endpoint: str | None = None  # None: AWS
    region: str | None = None
    path_style: bool | None = None
    access_key_id: str
    secret_access_key: str = Field(repr=False)
    session_token: str | None = Field(default=None, repr=False)
    expires_at: float


class DataPlan(Wire):
    """The data an attempt works with, URIs resolved by the exchange."""

    inputs: dict[str, str] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict)
    checkpoint: str | None = None
    store: StoreAccess | None = None
    bundle: str | None = None  # the code bundle's URI in the store (readable with ``store``)
    # where the job's lightning_logs/ is kept (each attempt's below <attempt>/), writable with
    # ``store``; None: nowhere (an older coordinator, or the job names it as an output)
    lightning_logs: str | None = None


DeviceAddress = Annotated[str, Field(pattern=DEVICE_ADDRESS)]


MAX_GANG = 1024  # core.compute.MAX_NODES


class Gang(Wire):
    """A member's place in its gang: its rank, every member's address by rank, and the port
    rank 0 listens on — None in rank 0's own start: its agent chooses a free one, says which
    (``rendezvous``), and the others are started with it. Before its process starts, each
    member proves it reaches rank 0 there (rank 0 waits for all); ``timeout_s`` bounds it."""

    rank: int = Field(ge=0, lt=MAX_GANG)
    addresses: list[Annotated[str, Field(max_length=64)]] = Field(min_length=2,
                                                                  max_length=MAX_GANG)
    port: int | None = Field(default=None, ge=1, le=65535)
    gpus_per_node: int = Field(default=0, ge=0, le=64)
    timeout_s: float = Field(default=600.0, gt=0, le=86400)

    @field_validator("addresses")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        return [ip_literal(a) for a in value]

    @model_validator(mode="after")
    def _consistent(self) -> Gang:
        if self.rank >= len(self.addresses):
            raise ValueError(f"rank {self.rank} of a gang of {len(self.addresses)}")
        if self.rank and self.port is None:
            raise ValueError("a member other than rank 0 needs its gang's port")
        return self


class StartJob(Wire):
    job_id: JobId
    attempt: int = Field(ge=1)
    spec: JobSpec
    env: dict[str, str] = Field(default_factory=dict)  # set by the exchange (BOURSE_JOB_ID...)
    data: DataPlan | None = None
    # the values of the secrets the spec names; the agent never writes them to its spool
    secret_env: dict[str, str] = Field(default_factory=dict)
    # the devices the attempt is given (GPU or MIG UUIDs, or GPU indices), the only ones it
    # sees; [] none (a CPU job on a GPU node); None: not said (an older coordinator), the
    # job sees every GPU of the node
    gpus: list[DeviceAddress] | None = Field(default=None, max_length=64)
    gang: Gang | None = None  # a member of a multi-node job

    def __repr__(self) -> str:  # keep secrets out of tracebacks and logs
        return f"StartJob(job_id={self.job_id!r}, attempt={self.attempt})"


class CancelJob(Wire):
    """Stop an attempt: SIGTERM, then SIGKILL after ``grace_s``. ``stale`` marks an attempt the
    exchange has already given up on (fencing); the agent reports nothing more about it."""

    job_id: JobId
    attempt: int = Field(ge=1)
    grace_s: float = Field(default=10.0, ge=0, le=3600)
    reason: str = "cancelled"
    stale: bool = False


class Preempt(Wire):
    """The node is being reclaimed: SIGTERM every attempt, SIGKILL what still runs after
    ``notice_s`` (the time the provider gives, e.g. a cloud's spot-interruption notice)."""

    notice_s: float = Field(ge=0, le=3600)
    reason: str = Field(default="the node is being reclaimed", max_length=500)


AGENT_TO_SERVER: dict[str, type[Wire]] = {
    "hello": Hello, "heartbeat": Heartbeat, "job_event": JobEvent, "log_chunk": LogChunk,
    "probe_report": ProbeReportMessage, "ack": Ack, "error": Error, "metrics": Metrics,
    "interruption": Interruption,
    "track": TrackBatch,  # optional: only to a coordinator that accepts it
    # streams (bourse.protocol.stream): not acknowledged, not spooled
    "stream_opened": StreamOpened, "stream_data": StreamData, "stream_window": StreamWindow,
    "stream_close": StreamClose,
}
SERVER_TO_AGENT: dict[str, type[Wire]] = {
    "welcome": Welcome, "start_job": StartJob, "cancel_job": CancelJob, "ack": Ack,
    "error": Error, "preempt": Preempt,
    "stream_open": StreamOpen, "stream_data": StreamData, "stream_window": StreamWindow,
    "stream_resize": StreamResize, "stream_close": StreamClose,
}


def envelope(msg_id: str, body: Wire) -> Envelope:
    kind = _TYPE_OF[type(body)]
    return Envelope(id=msg_id, type=kind, body=body.model_dump(mode="json"))


_TYPE_OF: dict[type[Wire], str] = {
    **{cls: name for name, cls in AGENT_TO_SERVER.items()},
    **{cls: name for name, cls in SERVER_TO_AGENT.items()},
}
