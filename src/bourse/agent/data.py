"""The node's side of the data plane, as runtime hooks (`bourse.agent.hooks`).

Before a job starts: its inputs are prefetched into the node-wide content-addressed cache
(``<work dir>/cache``) with the attempt's own scoped key and linked under
``<attempt>/inputs/<name>``, with progress as ``preparing`` events; empty output directories
are made under ``<attempt>/outputs/<name>``; the job's environment gets ``BOURSE_INPUT_<NAME>``,
``BOURSE_OUTPUT_<NAME>``, ``BOURSE_CHECKPOINT_URI``, the endpoint and the scoped key. After it
exited with status 0: each output directory is uploaded (parallel, multipart, retried) and the
``exited`` event says where (``outputs``) or why not (``outputs_error``). Outputs of a job that
failed or was cancelled are not uploaded. However it exited, a ``lightning_logs/`` it left in
its working directory is kept in the store (`bourse.agent.kept`; ``BOURSE_LIGHTNING_LOGS_URI``
says where). When the attempt is over its cache pins are released and its input links and
output directories removed.

Event data carries sizes, rates and URIs; never a key.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bourse.agent import kept
from bourse.agent.attempt import StartError
from bourse.agent.hooks import AttemptHooks, Emit
from bourse.agent.shim import AttemptDir
from bourse.core.uri import StoreURI, parse_uri
from bourse.protocol.agent import DataPlan, StartJob, StoreAccess
from bourse.storage.cache import ContentCache
from bourse.storage.checkpoint import latest_complete
from bourse.storage.errors import StorageError
from bourse.storage.jobenv import LIGHTNING_LOGS, job_env
from bourse.storage.prefetch import Prefetcher, PrefetchOptions, PrefetchResult
from bourse.storage.progress import Progress, format_bytes
from bourse.storage.remote import Stores
from bourse.storage.settings import AccessKey, StoreSettings
from bourse.storage.store import ObjectStore
from bourse.storage.upload import UploadOptions, upload

PROGRESS_S = 1.0  # at most one progress event a second
GiB = 1 << 30
MAX_DEFAULT_CACHE = 100 * GiB


def default_cache_limit(free_bytes: int) -> int:
    """20 % of the free disk, at most 100 GB."""
    return min(free_bytes // 5, MAX_DEFAULT_CACHE)


def settings_of(access: StoreAccess) -> StoreSettings:
    key = AccessKey(access.access_key_id, access.secret_access_key, access.session_token)
    return StoreSettings(endpoint=access.endpoint, region=access.region,
                         path_style=access.path_style, access_key=key)


def holder(job_id: str, attempt: int) -> str:
    return f"{job_id}.{attempt}"


def progress_data(progress: Progress, step: str) -> dict[str, Any]:
    return {"step": step, "done": progress.done, "total": progress.total,
            "rate": round(progress.rate), "objects_done": progress.objects_done,
            "objects_total": progress.objects_total, "text": str(progress)}


def inputs_ready(result: PrefetchResult) -> dict[str, Any]:
    """The last ``preparing`` event: what was downloaded and what the cache already had."""
    cached = result.total_bytes - result.downloaded_bytes
    text = (f"inputs ready: {format_bytes(result.total_bytes)} in {result.objects} object(s), "
            f"{format_bytes(result.downloaded_bytes)} downloaded, {format_bytes(cached)} from "
            f"the node's cache, {result.seconds:.1f} s")
    return {"step": "inputs", "done": result.total_bytes, "total": result.total_bytes,
            "downloaded": result.downloaded_bytes, "cached": cached,
            "objects": result.objects, "seconds": round(result.seconds, 3), "text": text}


def throttled(emit: Emit, kind: str, step: str, *, final: bool = True,
              clock: Callable[[], float] = time.monotonic) -> Callable[[Progress], None]:
    """Progress as events, at most one per `PROGRESS_S`, and the finished one once unless
    ``final`` is False (a summary follows instead)."""
    last, ended = [float("-inf")], [False]

    def report(progress: Progress) -> None:
        now = clock()
        if progress.finished:
            if final and not ended[0]:
                emit(kind, progress_data(progress, step))
            ended[0] = True
        elif now - last[0] >= PROGRESS_S:
            last[0] = now
            emit(kind, progress_data(progress, step))
    return report


class NodeData(AttemptHooks):
    def __init__(self, cache_dir: Path, limit: int, *,
                 prefetch: PrefetchOptions | None = None,
                 uploads: UploadOptions | None = None) -> None:
        self.cache = ContentCache(cache_dir, limit)
        self.prefetcher = Prefetcher(self.cache, _no_opener, prefetch or PrefetchOptions(
            progress_interval=PROGRESS_S))
        self.uploads = uploads or UploadOptions(progress_interval=PROGRESS_S)

    async def prepare(self, msg: StartJob, adir: AttemptDir, emit: Emit) -> dict[str, str]:
        plan, spec = msg.data, msg.spec
        if plan is None or plan.store is None:
            if spec.inputs or spec.outputs or spec.checkpoint:
                raise StartError("the job names data but the exchange sent no store access",
                                 hint="the exchange needs an object store")
            return {}
        settings = settings_of(plan.store)
        stores = Stores(settings)
        try:
            inputs = await self._inputs(msg, plan, adir, stores, emit)
        finally:
            stores.close()
        outputs = {name: _fresh_dir(adir.root / "outputs" / name) for name in plan.outputs}
        env = job_env(inputs=inputs, outputs=outputs, input_uris=_uris(plan.inputs),
                      output_uris=_uris(plan.outputs),
                      checkpoint=parse_uri(plan.checkpoint) if plan.checkpoint else None,
                      settings=settings.with_access_key(None),
                      lightning_logs=parse_uri(plan.lightning_logs) if plan.lightning_logs
                      else None)
        assert settings.access_key is not None
        return env | settings.access_key.env()

    async def _inputs(self, msg: StartJob, plan: DataPlan, adir: AttemptDir, stores: Stores,
                      emit: Emit) -> dict[str, Path]:
        if not plan.inputs:
            return {}
        try:
            result = await self.prefetcher.prefetch(
                plan.inputs, adir.root / "inputs", holder=holder(msg.job_id, msg.attempt),
                on_progress=throttled(emit, "preparing", "inputs", final=False),
                opener=stores)
        except StorageError as exc:
            raise StartError(f"inputs: {exc.message}", hint=exc.hint) from None
        emit("preparing", inputs_ready(result))
        return result.paths

    async def finish(self, msg: StartJob, adir: AttemptDir, exit_info: dict[str, Any],
                     emit: Emit) -> dict[str, Any]:
        plan, logs = msg.data, kept.lightning_logs(msg, adir)
        if logs is not None and (plan is None or plan.store is None or not plan.lightning_logs):
            kept.not_kept(emit, stored=plan is not None and plan.store is not None)
        if plan is None or plan.store is None:
            return {}
        stores = Stores(settings_of(plan.store))
        try:
            found, more = await asyncio.gather(
                self._outputs(plan, stores, adir, exit_info, emit),
                self._keep(plan, stores, logs, msg.attempt, emit))
            found |= more
            if plan.checkpoint:
                found |= await last_checkpoint(stores, plan.checkpoint)
        finally:
            stores.close()
        return found

    async def _keep(self, plan: DataPlan, stores: Stores, logs: Path | None, attempt: int,
                    emit: Emit) -> dict[str, Any]:
        if logs is None or not plan.lightning_logs:
            return {}
        return await kept.keep(stores, logs, plan.lightning_logs, attempt,
                               options=self.uploads, emit=emit,
                               report=throttled(emit, "info", LIGHTNING_LOGS, final=False))

    async def _outputs(self, plan: DataPlan, stores: Stores, adir: AttemptDir,
                       exit_info: dict[str, Any], emit: Emit) -> dict[str, Any]:
        if not plan.outputs or exit_info.get("exit_code") != 0:
            return {}  # the job did not succeed: nothing of it is published
        report = throttled(emit, "info", "outputs")
        results = await asyncio.gather(*(
            self._upload(stores, adir.root / "outputs" / name, uri, report)
            for name, uri in plan.outputs.items()))
        errors = [f"{name}: {error}" for name, error in zip(plan.outputs, results, strict=True)
                  if error]
        if errors:
            return {"outputs_error": "; ".join(errors)}
        return {"outputs": dict(plan.outputs)}

    async def _upload(self, stores: Stores, source: Path, uri: str,
                      report: Callable[[Progress], None]) -> str | None:
        """None once ``source`` is in the store, else why it is not."""
        try:
            await upload(stores, source, uri, options=self.uploads, on_progress=report)
        except StorageError as exc:
            return exc.message
        return None

    def release(self, job_id: str, attempt: int, root: Path) -> None:
        self.prefetcher.release(holder(job_id, attempt))
        for folder in ("inputs", "outputs"):
            shutil.rmtree(root / folder, ignore_errors=True)


async def last_checkpoint(stores: Stores, prefix: str) -> dict[str, Any]:
    """The newest complete checkpoint under the job's prefix, for the exchange to measure
    the work an interrupted attempt lost; nothing when there is none or it cannot be read."""
    try:
        latest = await latest_complete(stores, prefix)
    except StorageError as exc:
        return {"checkpoint_error": exc.message}
    if latest is None:
        return {}
    return {"checkpoint": {"name": latest.name, "step": latest.step,
                           "created_at": latest.created.timestamp()}}


def _uris(named: Mapping[str, str]) -> dict[str, StoreURI]:
    return {name: parse_uri(uri) for name, uri in named.items()}


def _fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _no_opener(uri: StoreURI) -> ObjectStore:
    raise StorageError(f"no credentials for {uri}: every prefetch brings its attempt's own")
