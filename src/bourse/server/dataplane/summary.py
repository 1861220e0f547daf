"""What the exchange's store holds at a URI, summed up for a client that cannot read the store
itself (the app driver keys its stage cache by it): `summarise`.

A user may ask about what their project's jobs may read (``services.claims``): keys, sizes and
ETags tell them nothing they could not read anyway. The route checks that, between `location`
(the URI checked) and `summarise` (the store listed, outside any transaction).
"""

from __future__ import annotations

from bourse.core.errors import InvalidInput
from bourse.core.uri import StoreURI, parse_uri
from bourse.protocol.api import DataSummary
from bourse.server.dataplane.plan import NO_STORE_HINT
from bourse.server.dataplane.plane import DataPlane
from bourse.storage.errors import AccessDenied, StorageError
from bourse.storage.listing import content_digest, locate


def plane_of(plane: DataPlane | None) -> DataPlane:
    """The exchange's data plane, or why there is none (422)."""
    if plane is None:
        raise InvalidInput("this exchange has no object store", field="uri", hint=NO_STORE_HINT)
    return plane


def location(plane: DataPlane | None, text: str) -> tuple[DataPlane, StoreURI]:
    """``text`` as a URI of the exchange's store (with the plane that reads it), or why it
    cannot be summed up."""
    plane = plane_of(plane)
    uri = parse_uri(text, field="uri")
    if uri.scheme != "s3":
        raise InvalidInput(f"{text} is not an s3:// URI; the exchange reads its S3 store only",
                           field="uri", hint="name data in the exchange's store (s3://...)")
    return plane, uri


async def summarise(plane: DataPlane, uri: StoreURI) -> DataSummary:
    """The objects at ``uri`` (from `location`): how many, how many bytes and their digest.
    A prefix with nothing under it is zero objects, not an error."""
    try:
        found = await locate(plane.store_for(uri), uri)
    except AccessDenied as exc:  # the exchange's own key: not the caller's token (403)
        raise StorageError(f"the exchange's store refused to list {uri}",
                           hint="the bucket may not exist, or the store's key does not "
                                "cover it") from exc
    return DataSummary(uri=str(uri), single=found.single, objects=len(found.objects),
                       bytes=sum(i.size for i in found.objects),
                       digest=content_digest(found.objects))
