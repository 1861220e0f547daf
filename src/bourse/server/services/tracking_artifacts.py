"""Runs' artifacts in the exchange's store: ``tracking/<project>/<run>/<path>``.

MLflow's artifact paths are ``<experiment>/<run>/artifacts[/<path>]`` (the run's
``artifact_uri`` is ``mlflow-artifacts:/<experiment>/<run>/artifacts``); ``place_of`` reads one
and refuses what would leave the run's place (``..``, empty parts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bourse.core.errors import BourseError, InvalidInput, NotFound
from bourse.server.dataplane import DataPlane
from bourse.storage import ObjectNotFound
from bourse.storage.store import ObjectInfo, ObjectStore

ROOT = "tracking"


class NoStore(BourseError):
    http_status = 503


@dataclass(frozen=True)
class Place:
    run_id: str
    relative: str  # under the run's artifacts; "" for the root


def place_of(path: str) -> Place:
    parts = path.strip("/").split("/")
    if len(parts) < 3 or parts[2] != "artifacts":
        raise InvalidInput(f"not a run's artifact path: {path[:80]!r}",
                           hint="paths are <experiment>/<run>/artifacts/<file>")
    rest = parts[3:]
    if any(p in ("", ".", "..") for p in rest):
        raise InvalidInput(f"an artifact path may not hold empty, '.' or '..' parts: "
                           f"{path[:80]!r}")
    return Place(parts[1], "/".join(rest))


def key_of(project_id: str, place: Place) -> str:
    return f"{ROOT}/{project_id}/{place.run_id}/{place.relative}"


def _store(plane: DataPlane | None) -> ObjectStore:
    if plane is None:
        raise NoStore("this exchange has no object store, so runs cannot keep artifacts",
                      hint="start the coordinator with its embedded store or --store-endpoint")
    return plane.store


async def put(plane: DataPlane | None, project_id: str, place: Place, data: bytes) -> None:
    if not place.relative:
        raise InvalidInput("name the file to upload under the run's artifacts")
    await _store(plane).put(key_of(project_id, place), data)


async def get(plane: DataPlane | None, project_id: str, place: Place) -> bytes:
    try:
        return bytes(await _store(plane).get(key_of(project_id, place)))
    except ObjectNotFound:
        raise NotFound(f"run {place.run_id} has no artifact {place.relative!r}") from None


async def listing(plane: DataPlane | None, project_id: str,
                  place: Place) -> list[dict[str, Any]]:
    """The files and directories directly under ``place``, as MLflow lists them."""
    base = key_of(project_id, place).rstrip("/") + "/"
    found: dict[str, dict[str, Any]] = {}
    for info in await _store(plane).list(base):
        rest = info.key[len(base):]
        head, _, tail = rest.partition("/")
        path = f"{place.relative}/{head}".strip("/")
        found[head] = ({"path": path, "is_dir": True} if tail else
                       {"path": path, "is_dir": False, "file_size": info.size})
    return [found[k] for k in sorted(found)]


async def objects(plane: DataPlane | None, project_id: str, run_id: str) -> list[ObjectInfo]:
    """Every artifact of the run, nested ones too, in key order (keys relative to the run's
    place: ``key_of(project, Place(run, ""))``)."""
    base = key_of(project_id, Place(run_id, ""))
    return [ObjectInfo(i.key[len(base):], i.size, i.etag, i.last_modified)
            for i in await _store(plane).list(base) if i.key.startswith(base)]


async def head(plane: DataPlane | None, project_id: str,
               place: Place) -> tuple[ObjectStore, ObjectInfo]:
    """The store holding the run's artifact and the artifact (its full key), to stream it."""
    store = _store(plane)
    try:
        return store, await store.head(key_of(project_id, place))
    except ObjectNotFound:
        raise NotFound(f"run {place.run_id} has no artifact {place.relative!r}") from None
