"""Ranged S3 GETs straight from a socket into a file, for prefetch's worker threads.

Used for S3 endpoints named by URL (the embedded SeaweedFS, MinIO, a store on a private network)
with a static access key; AWS itself and everything else goes through obstore. Over plain HTTP
each body moves socket -> pipe -> file with ``splice(2)``, so its bytes never enter this
process: the kernel copies them once, into the page cache, where a client reading into its own
buffers copies them twice (obstore three times, docs/storage.md). Over TLS (Python's `ssl`,
the system's trust store plus ``StoreSettings.ca_file``) each body is decrypted into one
buffer per connection and written from there with ``pwrite``. What it speaks is the small part
of HTTP/1.1 a GET needs: keep-alive connections from a pool, ``Content-Length`` bodies, SigV4
(`bourse.storage.sigv4`). A response for another version of the object (its ETag differs) is
refused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import socket
import ssl
import struct
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bourse.core.uri import StoreURI
from bourse.storage.errors import (
    AccessDenied,
    ObjectNotFound,
    StorageError,
    StoreUnavailable,
    object_changed,
)
from bourse.storage.settings import AccessKey, StoreSettings
from bourse.storage.sigv4 import canonical_path, sign
from bourse.storage.store import RangeSink, SinkError, in_sink, normalize_etag

PIPE_SIZE = 1 << 20  # bytes a splice moves at most (the pipe's capacity, when allowed)
TLS_BUFFER = 256 << 10  # bytes a TLS connection decrypts into at a time
HEAD_LIMIT = 64 << 10  # a response's status line and headers
_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    header: str  # the Host header: with the port unless it is the default
    tls: bool

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"not an http(s) endpoint: {url}")
        default = _DEFAULT_PORTS[parts.scheme]
        port = parts.port or default
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        return cls(host, port, shown if port == default else f"{shown}:{port}",
                   parts.scheme == "https")


def usable(root: StoreURI, settings: StoreSettings) -> bool:
    """Whether `DirectReader` can serve this bucket: ``s3://`` at an endpoint URL,
    path-style, with a static key and no extra obstore options it would not honour."""
    if not (root.scheme == "s3" and settings.endpoint and settings.uses_path_style
            and settings.access_key is not None and not settings.options):
        return False
    try:
        endpoint = Endpoint.parse(settings.endpoint)
    except ValueError:
        return False
    return endpoint.tls or hasattr(os, "splice")


def read_ca_file(path: str) -> str:
    """The PEM text of a CA bundle, or a `StorageError` that says which file could not be read."""
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, ValueError) as exc:
        raise StorageError(f"cannot read the CA bundle {path}: {exc}",
                           hint="set AWS_CA_BUNDLE (StoreSettings.ca_file) to a readable PEM "
                                "file") from None


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """The system's trust store, plus ``ca_file``'s authorities when given."""
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cadata=read_ca_file(ca_file))
    return context


class _Connection:
    """A keep-alive connection and what its bodies pass through: a pipe (plain HTTP, closed by
    `close` or when the connection is collected) or a buffer (TLS)."""

    def __init__(self, endpoint: Endpoint, timeout_s: float,
                 tls: ssl.SSLContext | None) -> None:
        raw = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s)
        self.used = False  # it served a request: the store may have closed it since
        self.buffer: memoryview | None = None
        self._pipe: weakref.finalize[Any, Any] | None = None
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:  # the socket's timeout bounds the handshake and each wait
                self.sock: socket.socket = tls.wrap_socket(raw, server_hostname=endpoint.host)
                self.buffer = memoryview(bytearray(TLS_BUFFER))
                return
            self.sock = raw
            raw.setblocking(True)  # splice(2) blocks; SO_RCVTIMEO bounds each wait
            seconds = int(timeout_s)
            limit = struct.pack("ll", seconds, int((timeout_s - seconds) * 1e6))
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
            read_end, write_end = os.pipe()
        except BaseException:
            raw.close()
            raise
        self.read_end, self.write_end = read_end, write_end
        self._pipe = weakref.finalize(self, _close_fds, read_end, write_end)
        with contextlib.suppress(OSError):  # 1 MiB when /proc/sys/fs/pipe-max-size allows
            fcntl.fcntl(write_end, _F_SETPIPE_SZ, PIPE_SIZE)

    def close(self) -> None:
        self.sock.close()
        if self._pipe is not None:
            self._pipe()


def _close_fds(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class _Stale(Exception):
    """A reused connection failed before any answer: the store closed it while it was idle."""


@dataclass(slots=True)
class _Head:
    status: int
    headers: dict[str, str]
    rest: bytes  # body bytes that arrived with the headers


class DirectReader:
    """Ranged GETs of one bucket, each written into a `RangeSink`; thread-safe."""

    def __init__(self, root: StoreURI, settings: StoreSettings) -> None:
        assert settings.endpoint and settings.access_key
        self.root, self.endpoint = root, Endpoint.parse(settings.endpoint)
        self.key: AccessKey = settings.access_key
        self.region = settings.region or "us-east-1"
        self.timeout_s = settings.timeout_s
        self._tls = tls_context(settings.ca_file) if self.endpoint.tls else None
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def read_into(self, key: str, start: int, length: int, sink: RangeSink, *,
                  etag: str = "") -> None:
        """``length`` bytes of ``key`` from ``start`` into ``sink`` (blocking). Errors are
        ours: `StoreUnavailable` (retry: the sink knows how far it got) for connection
        failures, 5xx and throttling. A pooled connection the store closed while idle is
        replaced by a new one at once."""
        conn = self._take()
        try:
            try:
                reusable = self._get(conn, key, start, length, sink, etag=etag)
            except _Stale:
                conn.close()
                conn = self._connect()
                reusable = self._get(conn, key, start, length, sink, etag=etag)
        except SinkError as exc:
            conn.close()
            raise exc.error from None  # the sink's file, not the network: e.g. a full disk
        except OSError as exc:
            conn.close()
            raise StoreUnavailable(f"{self._uri(key)}: {_describe(exc)}",
                                   hint="retry later, or check the endpoint") from None
        except BaseException:
            conn.close()
            raise
        if reusable:
            conn.used = True
            with self._lock:
                self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self) -> _Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _connect(self) -> _Connection:
        try:
            return _Connection(self.endpoint, self.timeout_s, self._tls)
        except ssl.SSLCertVerificationError as exc:
            raise StorageError(
                f"the certificate of {self.endpoint.header} is not trusted "
                f"({exc.verify_message})", hint="add its CA to the system's trust store, or "
                "set AWS_CA_BUNDLE (StoreSettings.ca_file) to a PEM file with it") from None
        except OSError as exc:
            raise StoreUnavailable(f"cannot connect to {self.endpoint.header}: "
                                   f"{_describe(exc)}", hint="check the endpoint") from None

    def _get(self, conn: _Connection, key: str, start: int, length: int, sink: RangeSink, *,
             etag: str) -> bool:
        """One request on ``conn``; whether the connection can serve another."""
        path = canonical_path(f"/{self.root.bucket}/{key}")
        wanted = {"range": f"bytes={start}-{start + length - 1}"}
        if etag:
            wanted["if-match"] = f'"{etag}"'
        headers = sign("GET", self.endpoint.header, path, wanted, self.key, region=self.region)
        lines = [f"GET {path} HTTP/1.1", f"Host: {self.endpoint.header}",
                 *(f"{k}: {v}" for k, v in headers.items())]
        try:
            conn.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            head = _read_head(conn.sock)
        except (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:
            if conn.used:
                raise _Stale from exc
            raise
        if head.status not in (200, 206):
            raise self._refusal(key, head, conn.sock)
        self._check(key, head, start, length, etag)
        if head.rest[:length] and not in_sink(sink.write, head.rest[:length]):
            return False  # told to stop: the rest of the body is still on the wire
        left = length - min(length, len(head.rest))
        body = _splice_body if conn.buffer is None else _recv_body
        if not body(conn, left, sink):
            return False
        return head.headers.get("connection", "").lower() != "close"

    def _check(self, key: str, head: _Head, start: int, length: int, etag: str) -> None:
        size = head.headers.get("content-length", "")
        got = head.headers.get("content-range", "")
        whole = head.status == 200 and start == 0
        if not size.isdigit() or int(size) != length or (
                not whole and not got.startswith(f"bytes {start}-{start + length - 1}/")):
            raise StoreUnavailable(f"{self._uri(key)}: the store answered a different range "
                                   f"({got or size or 'no length'} for {length} bytes from "
                                   f"{start})", hint="retry; check the store supports ranges")
        answered = normalize_etag(head.headers.get("etag"))
        if etag and answered and answered != etag:
            raise object_changed(self._uri(key))

    def _refusal(self, key: str, head: _Head, sock: socket.socket) -> StorageError:
        body = head.rest + _read_some(sock, head.headers, len(head.rest))
        found = _CODE.search(body)
        code = found.group(1).decode(errors="replace") if found else str(head.status)
        uri = self._uri(key)
        if head.status == 404:
            return ObjectNotFound(f"{uri} does not exist ({code})")
        if head.status in (401, 403):
            return AccessDenied(f"access denied to {uri} ({code})",
                                hint="the credentials in use do not cover this bucket or prefix")
        if head.status == 412:
            return object_changed(uri)
        if head.status >= 500 or head.status == 429:
            return StoreUnavailable(f"store unavailable for {uri}: HTTP {head.status} {code}",
                                    hint="retry later")
        return StorageError(f"{uri}: HTTP {head.status} {code}")

    def _uri(self, key: str) -> StoreURI:
        return StoreURI(self.root.scheme, self.root.bucket, key)


def _read_head(sock: socket.socket) -> _Head:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            raise StoreUnavailable("the store's response headers are too large")
        more = sock.recv(HEAD_LIMIT)
        if not more:
            raise ConnectionResetError(errno.ECONNRESET, "connection closed before a response")
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise StoreUnavailable(f"not an HTTP response: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return _Head(int(parts[1]), headers, rest)


def _read_some(sock: socket.socket, headers: dict[str, str], have: int) -> bytes:
    """What is left of a (short, error) body, when its length is known and small."""
    size = headers.get("content-length", "")
    want = int(size) - have if size.isdigit() and int(size) <= HEAD_LIMIT else 0
    data = b""
    while len(data) < want:
        more = sock.recv(want - len(data))
        if not more:
            break
        data += more
    return data


def _recv_body(conn: _Connection, left: int, sink: RangeSink) -> bool:
    """Decrypt ``left`` body bytes into the connection's buffer, each time it is full (a
    ``recv`` gives one TLS record, 16 KiB at most) written to the sink; False when told to
    stop. Bytes received but not yet written when the connection fails are fetched again."""
    buffer = conn.buffer
    assert buffer is not None
    while left:
        want, got = min(left, len(buffer)), 0
        while got < want:
            read = conn.sock.recv_into(buffer[got:want])
            if read == 0:
                raise ConnectionResetError(errno.ECONNRESET, "connection closed mid-body")
            got += read
        left -= want
        if not in_sink(sink.write, buffer[:want]):
            return False
    return True


def _splice_body(conn: _Connection, left: int, sink: RangeSink) -> bool:
    """Move ``left`` body bytes socket -> pipe -> the sink's file; False when told to stop."""
    fd = in_sink(sink.descriptor) if left else -1
    while left:
        moved = os.splice(conn.sock.fileno(), conn.write_end, min(left, PIPE_SIZE))
        if moved == 0:
            raise ConnectionResetError(errno.ECONNRESET, "connection closed mid-body")
        left -= moved
        while moved:  # in write_size pieces: small page-cache folios (`RangeSink.write`)
            written = in_sink(os.splice, conn.read_end, fd, min(moved, max(1, sink.write_size)),
                              offset_dst=sink.position)
            moved -= written
            if not in_sink(sink.advance, written):
                return False
    return True


def _describe(exc: OSError) -> str:
    if isinstance(exc, BlockingIOError | TimeoutError):
        return "timed out"
    return exc.strerror or str(exc)
