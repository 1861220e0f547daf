"""What a job may touch in the exchange's store, worked out from its spec (pure).

A job reads its inputs and its code bundle, and writes its outputs and its checkpoint prefix
(default ``s3://<bucket>/jobs/<job id>/checkpoints/``, the same for every attempt), and the
agent writes what Lightning left in its working directory (``lightning_logs/``) below
``s3://<bucket>/jobs/<job id>/lightning_logs/<attempt>/`` when the attempt ends, however it
ended (unless the job names an output ``lightning_logs`` itself: then that is it). Writes may
not reach the prefixes the exchange keeps for itself: ``bundles/`` (code, content-addressed),
``jobs/`` (default checkpoints, which the exchange assigns) and ``logs/`` (ended jobs' logs),
nor claim ``runs/`` as a whole (every project's app runs write below it). Reads may not reach
them either, except a job's own project's ``jobs/<id>/`` (``services.claims`` asks whose).
Each project has a home, ``projects/<project>/`` (where `bourse cp` and local inputs put data):
only that project reads or writes inside it, and nobody claims ``projects/`` as a whole.

Which project may touch the rest is ``services.claims``'s business; the prefix arithmetic it
needs is here (`location`, `ancestors`, `below`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from bourse.core.errors import InvalidInput
from bourse.core.uri import StoreURI, parse_uri
from bourse.protocol.agent import DataPlan, StoreAccess
from bourse.protocol.common import JobSpec
from bourse.server.files.bundles import bundle_key
from bourse.storage.credentials import Scope, ScopedCredentials
from bourse.storage.jobenv import LIGHTNING_LOGS, default_checkpoint, default_lightning_logs
from bourse.storage.settings import StoreSettings

RESERVED = ("bundles/", "jobs/", "logs/", "tracking/")
SHARED = "runs/"  # app runs write at runs/<run>/<stage>/ (bourse.app.exchange)
JOBS = "jobs/"
HOMES = "projects/"  # projects/<project>/: a project's own place in the store
NO_STORE_HINT = ("this exchange runs without an object store (`bourse server --no-store`); "
                  "start it with the embedded store (the default) or --store-endpoint")


def bundle_uri(root: StoreURI, sha256: str) -> StoreURI:
    return root.join(bundle_key(sha256))


def uses_data(spec: JobSpec) -> bool:
    return bool(spec.inputs or spec.outputs or spec.checkpoint)


def _uris(spec: JobSpec) -> Iterator[tuple[str, str, bool]]:
    """(field, uri, written) of every URI a spec names."""
    yield from ((f"inputs.{n}", u, False) for n, u in spec.inputs.items())
    yield from ((f"outputs.{n}", u, True) for n, u in spec.outputs.items())
    if spec.checkpoint is not None:
        yield "checkpoint", spec.checkpoint, True


def overlaps(a: StoreURI, b: StoreURI) -> bool:
    """Whether one location contains the other (an object ``k`` counts as ``k/`` too, as its
    credentials do)."""
    if (a.scheme, a.bucket) != (b.scheme, b.bucket):
        return False
    ka, kb = a.as_prefix().key, b.as_prefix().key
    return ka.startswith(kb) or kb.startswith(ka)


def check_spec(spec: JobSpec, root: StoreURI | None) -> None:
    """Refuse, at submit, data the exchange cannot grant: any data without a store, URIs
    other than ``s3://`` (job credentials are S3 keys), writes into the exchange's prefixes
    or above ``runs/``, reads of ``logs/``, ``bundles/``, ``tracking/`` or all of ``jobs/``."""
    for field, text, written in _uris(spec):
        if root is None:
            raise InvalidInput(f"the job names data ({field}) but this exchange has no object "
                               "store", field=field, hint=NO_STORE_HINT)
        uri = parse_uri(text, field=field)
        if uri.scheme != "s3":
            raise InvalidInput(f"{field}: {text} is not an s3:// URI; job credentials cover "
                               "the exchange's S3 store only", field=field,
                               hint="copy the data into an s3:// bucket of the exchange")
        if written:
            check_write(field, uri, root)
        else:
            check_read(field, uri, root)


def check_write(field: str, uri: StoreURI, root: StoreURI) -> None:
    """Refuse writes into the exchange's own prefixes, over every home or all of ``runs/``
    (a home's own project is ``services.claims``'s to check)."""
    reserved = next((r for r in RESERVED if overlaps(uri, root.join(r))), None)
    if reserved is not None:
        raise InvalidInput(
            f"{field}: {uri} reaches {root.join(reserved)}, which the exchange keeps for "
            "itself", field=field, hint=f"write elsewhere, e.g. {root.join('data/')}; "
            "the default checkpoint is already a prefix of the job's own")
    if overlaps(uri, root.join(HOMES)) and home_of(uri, root) is None:
        raise InvalidInput(
            f"{field}: {uri} covers {root.join(HOMES)}, where every project has its home",
            field=field, hint=f"write below a project's home, {root.join(HOMES, '<project>/')}")
    if contains(uri, root.join(SHARED)):
        raise InvalidInput(
            f"{field}: {uri} covers {root.join(SHARED)}, where the app runs of every project "
            "write", field=field, hint=f"write below a run's own prefix, e.g. "
                                       f"{root.join(SHARED, '<run>/')}")


def check_read(field: str, uri: StoreURI, root: StoreURI) -> None:
    """Refuse reads of the exchange's own prefixes: ``logs/``, ``bundles/`` (a job's own
    bundle is granted apart) and ``tracking/`` (runs' artifacts: the tracking API serves
    them to their own project), and ``jobs/`` except inside one job's prefix (whose project
    may read it: `job_of`)."""
    reserved = next((r for r in RESERVED if overlaps(uri, root.join(r))), None)
    if reserved is None or (reserved == JOBS and job_of(uri, root) is not None):
        if overlaps(uri, root.join(HOMES)) and home_of(uri, root) is None:
            raise InvalidInput(
                f"{field}: {uri} covers {root.join(HOMES)}, every project's home",
                field=field, hint=f"read below your project's home, "
                                  f"{root.join(HOMES, '<project>/')}")
        return
    raise InvalidInput(
        f"{field}: {uri} reaches {root.join(reserved)}, which the exchange keeps for itself",
        field=field, hint="read a job's checkpoints at s3://<bucket>/jobs/<job id>/, its "
                          "outputs at their URIs, its logs with `bourse logs JOB`, a "
                          "tracked run's artifacts with `mlflow artifacts download` or "
                          "the run's page")


def contains(outer: StoreURI, inner: StoreURI) -> bool:
    """Whether ``outer`` covers all of ``inner``."""
    return (outer.scheme, outer.bucket) == (inner.scheme, inner.bucket) and \
        inner.as_prefix().key.startswith(outer.as_prefix().key)


def job_of(uri: StoreURI, root: StoreURI) -> str | None:
    """The job whose prefix ``root/jobs/<id>/`` holds ``uri``; None elsewhere."""
    key = uri.as_prefix().key
    if uri.root != root or not key.startswith(JOBS):
        return None
    return key[len(JOBS):].partition("/")[0] or None


def home_of(uri: StoreURI, root: StoreURI) -> str | None:
    """The project whose home ``root/projects/<project>/`` holds ``uri``; None elsewhere."""
    key = uri.as_prefix().key
    if uri.root != root or not key.startswith(HOMES):
        return None
    return key[len(HOMES):].partition("/")[0] or None


def home_uri(root: StoreURI, project_id: str) -> StoreURI:
    """A project's home in the exchange's bucket."""
    return root.join(HOMES, project_id + "/")


def location(field: str, text: str) -> StoreURI:
    """A URI as a location: the prefix it names (an object ``k`` counts as ``k/``, as
    credentials do)."""
    return parse_uri(text, field=field).as_prefix()


def reads(spec: JobSpec) -> list[tuple[str, StoreURI]]:
    return [(f"inputs.{n}", location(f"inputs.{n}", u)) for n, u in spec.inputs.items()]


def writes(spec: JobSpec) -> list[tuple[str, StoreURI]]:
    """(field, location) of what a job writes; its checkpoint once ``resolve_spec`` has
    filled it in."""
    found = [(f"outputs.{n}", location(f"outputs.{n}", u)) for n, u in spec.outputs.items()]
    if spec.checkpoint is not None:
        found.append(("checkpoint", location("checkpoint", spec.checkpoint)))
    return found


def ancestors(key: str) -> list[str]:
    """Every prefix that contains the prefix ``key`` (empty or ending in ``/``), itself
    included: ``a/b/`` -> ``""``, ``a/``, ``a/b/``."""
    parts = key.split("/")[:-1]
    return ["", *("".join(p + "/" for p in parts[:n]) for n in range(1, len(parts) + 1))]


def below(key: str) -> tuple[str, str] | None:
    """The byte range of keys that start with the prefix ``key`` (ending in ``/``): from
    ``key`` up to ``key`` with its ``/`` replaced by the next byte, ``0``. None for the
    empty prefix (everything)."""
    return (key, key[:-1] + "0") if key else None


def checkpoint_of(spec: JobSpec, job_id: str, root: StoreURI) -> str:
    return spec.checkpoint or str(default_checkpoint(root, job_id))


def resolve_spec(spec: JobSpec, job_id: str, root: StoreURI | None) -> JobSpec:
    """The spec as stored: checked, and for a job that names data, with its default
    checkpoint filled in (so that every attempt, and the job's view, name the same prefix).

    A job that names no data gets no data plan: issuing and revoking an attempt's key costs
    the store's IAM API a few hundred milliseconds, which short jobs that need no store
    should not pay (and the exchange's start rate with them). A job that may run on spot
    capacity gets its checkpoint prefix too: it is how it survives a reclaim; so does a gang,
    which is retried whole when one member is lost."""
    check_spec(spec, root)
    wants = uses_data(spec) or spec.compute.spot != "never" or spec.compute.num_nodes > 1
    if root is None or spec.checkpoint is not None or not wants:
        return spec
    return spec.model_copy(update={"checkpoint": checkpoint_of(spec, job_id, root)})


def lightning_logs_of(spec: JobSpec, job_id: str, root: StoreURI) -> StoreURI | None:
    """Where the agent keeps the job's ``lightning_logs/``; None when the job names an
    output of that name (its own place for them)."""
    return None if LIGHTNING_LOGS in spec.outputs else default_lightning_logs(root, job_id)


def attempt_scope(spec: JobSpec, job_id: str, root: StoreURI) -> Scope:
    """Read the inputs and the code bundle; write the outputs, the checkpoint prefix and the
    job's ``lightning_logs/`` prefix."""
    read: list[str | StoreURI] = list(spec.inputs.values())
    if spec.bundle:
        read.append(bundle_uri(root, spec.bundle))
    checkpoint = parse_uri(checkpoint_of(spec, job_id, root)).as_prefix()
    kept = lightning_logs_of(spec, job_id, root)
    return Scope.of(read, [*spec.outputs.values(), checkpoint, *([kept] if kept else [])])


def store_access(settings: StoreSettings, credentials: ScopedCredentials) -> StoreAccess:
    key = credentials.access_key
    return StoreAccess(endpoint=settings.endpoint, region=settings.region,
                       path_style=settings.uses_path_style, access_key_id=key.access_key_id,
                       secret_access_key=key.secret_access_key, session_token=key.session_token,
                       expires_at=credentials.expires_at.timestamp())


def data_plan(spec: JobSpec, job_id: str, root: StoreURI, settings: StoreSettings,
              credentials: ScopedCredentials) -> DataPlan:
    kept = lightning_logs_of(spec, job_id, root)
    return DataPlan(inputs=dict(spec.inputs), outputs=dict(spec.outputs),
                    checkpoint=checkpoint_of(spec, job_id, root),
                    store=store_access(settings, credentials),
                    bundle=str(bundle_uri(root, spec.bundle)) if spec.bundle else None,
                    lightning_logs=str(kept) if kept else None)


def renewal_due(credentials: ScopedCredentials, now: datetime, ttl: timedelta) -> bool:
    """Renew once half the lifetime has passed."""
    return credentials.expires_at - now <= ttl / 2
