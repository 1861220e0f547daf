"""The real `ObjectStore`: obstore (Rust ``object_store`` under a thin Python binding) for
``s3://`` (any S3-compatible endpoint), ``gs://``, ``az://`` and ``file://``.

obstore was measured against boto3 and aiobotocore on the same SeaweedFS endpoint (see
docs/storage.md): it moves the most bytes per CPU second, which matters on nodes where the job,
not the downloader, should get the cores, and it speaks GCS and Azure through the same calls.
"""

from __future__ import annotations

import atexit
import gc
import re
import time
import weakref
from collections.abc import AsyncIterator, Generator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import obstore
import obstore.exceptions as oe
from obstore.store import AzureStore, GCSStore, LocalStore, S3Store
from typing_extensions import Buffer

from bourse.core.uri import StoreURI, parse_uri
from bourse.storage.direct import DirectReader, read_ca_file
from bourse.storage.direct import usable as direct_usable
from bourse.storage.errors import (
    AccessDenied,
    ObjectNotFound,
    StorageError,
    StoreUnavailable,
    object_changed,
)
from bourse.storage.settings import StoreSettings
from bourse.storage.store import (
    DEFAULT_PART_SIZE,
    DEFAULT_STREAM_CHUNK,
    ObjectInfo,
    ObjectStore,
    RangeSink,
    directory,
    normalize_etag,
)

_STATUS = re.compile(r"status code: (\d{3})")
_DENIED = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken",
           "InvalidToken")
_MISSING = ("NoSuchBucket", "NoSuchKey")


def translate(exc: Exception, uri: StoreURI) -> StorageError:
    """An obstore exception as one of ours, with the first line of its message only (obstore
    appends pages of debug output)."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    status = _STATUS.search(text)
    code = int(status.group(1)) if status else 0
    if isinstance(exc, FileNotFoundError | oe.NotFoundError) or code == 404 or any(
            m in text for m in _MISSING):
        return ObjectNotFound(f"{uri} does not exist ({first})")
    if isinstance(exc, oe.PermissionDeniedError | oe.UnauthenticatedError) or code in (
            401, 403) or any(m in text for m in _DENIED):
        return AccessDenied(f"access denied to {uri}",
                            hint="the credentials in use do not cover this bucket or prefix")
    if isinstance(exc, oe.GenericError) and (code == 0 or code >= 500 or code == 429):
        return StoreUnavailable(f"store unavailable for {uri}: {first}",
                                hint="retry later, or check the endpoint URL and network")
    return StorageError(f"{uri}: {first}")


class RemoteStore(ObjectStore):
    """One bucket through obstore. Construct with `open_store`."""

    def __init__(self, root: StoreURI, store: Any, endpoint: str | None = None, *,
                 direct: DirectReader | None = None) -> None:
        self.root = root
        self._store = store
        self._endpoint = endpoint
        self._direct = direct
        _LIVE.add(self)
        if not _OPENED:
            _OPENED.append(True)

    def release(self) -> None:
        """Drop the obstore client and the direct reader's connections; the store is
        unusable afterwards (what `_release_all` does at exit)."""
        self._store = None
        if self._direct is not None:
            self._direct.close()

    @property
    def origin(self) -> str:
        return f"{self.root} at {self._endpoint}" if self._endpoint else str(self.root)

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        start = directory(prefix)
        out: list[ObjectInfo] = []
        try:
            async for chunk in obstore.list(self._store, start or None, chunk_size=1000):
                out.extend(ObjectInfo(m["path"], m["size"], normalize_etag(m["e_tag"]),
                                      m["last_modified"]) for m in chunk)
        except Exception as exc:
            raise translate(exc, self.uri(start)) from None
        return out

    async def head(self, key: str) -> ObjectInfo:
        try:
            meta = await obstore.head_async(self._store, key)
        except Exception as exc:
            raise translate(exc, self.uri(key)) from None
        return ObjectInfo(meta["path"], meta["size"], normalize_etag(meta["e_tag"]),
                          meta["last_modified"])

    async def get(self, key: str) -> Buffer:
        try:
            result = await obstore.get_async(self._store, key)
            return await result.bytes_async()
        except Exception as exc:
            raise translate(exc, self.uri(key)) from None

    async def get_range(self, key: str, start: int, length: int) -> Buffer:
        try:
            return await obstore.get_range_async(self._store, key, start=start, length=length)
        except Exception as exc:
            raise translate(exc, self.uri(key)) from None

    async def stream_range(self, key: str, start: int, length: int,
                           chunk: int = DEFAULT_STREAM_CHUNK) -> AsyncIterator[Buffer]:
        try:
            result = await obstore.get_async(self._store, key,
                                             options={"range": (start, start + length)})
            async for piece in result.stream(min_chunk_size=chunk):
                yield piece
        except Exception as exc:
            raise translate(exc, self.uri(key)) from None

    def read_range(self, key: str, start: int, length: int, chunk: int = DEFAULT_STREAM_CHUNK,
                   *, etag: str = "") -> Generator[Buffer, None, None]:
        options: dict[str, Any] = {"range": (start, start + length)}
        if etag:
            options["if_match"] = f'"{etag}"'
        try:
            result = obstore.get(self._store, key, options=cast(Any, options))
            yield from result.stream(min_chunk_size=chunk)
        except oe.PreconditionError:
            raise object_changed(self.uri(key)) from None
        except Exception as exc:
            raise translate(exc, self.uri(key)) from None

    def read_range_into(self, key: str, start: int, length: int, sink: RangeSink, *,
                        chunk: int = DEFAULT_STREAM_CHUNK, etag: str = "") -> None:
        """Through `DirectReader` (socket to file, no copy here) where it serves the bucket,
        else obstore's stream (`read_range`)."""
        if self._direct is None:
            super().read_range_into(key, start, length, sink, chunk=chunk, etag=etag)
        else:
            self._direct.read_into(key, start, length, sink, etag=etag)

    async def put(self, key: str, data: Buffer) -> str:
        try:
            result = await obstore.put_async(self._store, key, data, use_multipart=False)
        except Exception as exc:
            raise translate(exc, self.uri(key)) from None
        return normalize_etag(result["e_tag"])

    async def put_file(self, key: str, path: Path, *, part_size: int = DEFAULT_PART_SIZE,
                       concurrency: int = 8) -> str:
        multipart = path.stat().st_size > part_size
        try:
            result = await obstore.put_async(self._store, key, path, use_multipart=multipart,
                                             chunk_size=part_size, max_concurrency=concurrency)
        except Exception as exc:
            raise translate(exc, self.uri(key)) from None
        return normalize_etag(result["e_tag"])

    async def probe(self) -> None:
        """A listing of at most one key: NoSuchBucket is `ObjectNotFound`, a key that does
        not reach the bucket `AccessDenied`."""
        try:
            stream = obstore.list(self._store, None, chunk_size=1)
            await anext(aiter(stream), None)
        except Exception as exc:
            raise translate(exc, self.root) from None

    async def copy(self, source: str, dest: str) -> str:
        """A server-side copy (S3 CopyObject): the bytes do not pass through here."""
        try:
            await obstore.copy_async(self._store, source, dest)
        except Exception as exc:
            raise translate(exc, self.uri(source)) from None
        return (await self.head(dest)).etag

    async def delete(self, key: str) -> None:
        try:
            await obstore.delete_async(self._store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            error = translate(exc, self.uri(key))
            if not isinstance(error, ObjectNotFound):
                raise error from None


def _client_options(settings: StoreSettings) -> dict[str, Any]:
    options: dict[str, Any] = {
        "allow_http": settings.allows_http, "timeout": f"{int(settings.timeout_s)}s",
        "connect_timeout": "10s", "pool_max_idle_per_host": "256"}
    if settings.ca_file:
        options["root_certificate"] = read_ca_file(settings.ca_file)
    return options


def _retry(settings: StoreSettings) -> dict[str, Any]:
    return {"max_retries": settings.max_retries, "retry_timeout": timedelta(minutes=3)}


def _s3(root: StoreURI, settings: StoreSettings) -> Any:
    config: dict[str, Any] = dict(settings.options)
    config["virtual_hosted_style_request"] = not settings.uses_path_style
    if settings.endpoint:
        config["endpoint"] = settings.endpoint
    if settings.region:
        config["region"] = settings.region
    if settings.access_key:
        key = settings.access_key
        config |= {"access_key_id": key.access_key_id,
                   "secret_access_key": key.secret_access_key}
        if key.session_token:
            config["session_token"] = key.session_token
    return S3Store(root.bucket, config=cast(Any, config), client_options=cast(
        Any, _client_options(settings)), retry_config=cast(Any, _retry(settings)))


def open_store(uri: str | StoreURI, settings: StoreSettings | None = None) -> ObjectStore:
    """The store holding ``uri``'s bucket (the URI's key is ignored)."""
    root = parse_uri(uri).root
    settings = settings or StoreSettings()
    options = cast(Any, _client_options(settings))
    retry = cast(Any, _retry(settings))
    if root.scheme == "s3":
        direct = DirectReader(root, settings) if direct_usable(root, settings) else None
        return RemoteStore(root, _s3(root, settings), settings.endpoint, direct=direct)
    if root.scheme == "gs":
        return RemoteStore(root, GCSStore(root.bucket, config=cast(Any, dict(settings.options)),
                                          client_options=options, retry_config=retry))
    if root.scheme == "az":
        return RemoteStore(root, AzureStore(root.bucket, config=cast(
            Any, dict(settings.options)), client_options=options, retry_config=retry))
    return RemoteStore(root, LocalStore(prefix="/"))


class Stores:
    """An `Opener` that keeps one store (one connection pool) per bucket."""

    def __init__(self, settings: StoreSettings | None = None) -> None:
        self.settings = settings or StoreSettings()
        self._open: dict[StoreURI, ObjectStore] = {}

    def __call__(self, uri: StoreURI) -> ObjectStore:
        root = uri.root
        if root not in self._open:
            self._open[root] = open_store(root, self.settings)
        return self._open[root]

    def close(self) -> None:
        """Release every store opened so far (connections, pipes); later calls open anew."""
        opened, self._open = self._open, {}
        for store in opened.values():
            if isinstance(store, RemoteStore):
                store.release()


_LIVE: weakref.WeakSet[RemoteStore] = weakref.WeakSet()
_OPENED: list[bool] = []  # non-empty once this process opened an obstore client
EXIT_SETTLE_S = 0.05


@atexit.register
def _release_all() -> None:
    """At exit, while the interpreter is still whole, drop every obstore client and give its
    Rust runtime a moment, GIL released, to finish what it still does with Python objects.

    Without this, a short-lived process that used a store (a job saving a checkpoint)
    sometimes died of SIGABRT after its last line: a runtime thread that takes the GIL once
    Python has started finalizing is made to exit, which Rust turns into an abort. Measured
    here: 20 of 150 such processes aborted with no hook; with the release alone, 3 of 720
    still did (a loaded machine); with the settling pause, 0 of 1,200 on the same machine.
    The pause is paid only by processes that opened an obstore client."""
    if not _OPENED:
        return
    for store in list(_LIVE):
        store.release()
    gc.collect()
    time.sleep(EXIT_SETTLE_S)
