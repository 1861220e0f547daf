"""Whether the buckets a job writes to (or a user asks credentials for) exist, and the
exchange's key reaches them: asked of the store before a job is accepted, so that a job whose
``--output`` names a missing bucket is refused at submit instead of failing after training.

The exchange's own bucket is taken as there (it is made at start). Other buckets are probed
with one listing of at most one key, outside any transaction; a bucket found is remembered
for `KEEP_S`, so a stream of submits costs one probe a minute per bucket.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from bourse.core.errors import Forbidden, InvalidInput
from bourse.core.uri import StoreURI, parse_uri
from bourse.protocol.common import JobSpec
from bourse.server.dataplane.plan import home_uri
from bourse.storage.errors import AccessDenied, ObjectNotFound, StoreUnavailable
from bourse.storage.store import Opener

KEEP_S = 60.0
Located = Iterable[tuple[str, StoreURI]]


class Buckets:
    """The buckets known to exist, probed through ``opener`` (the root key's stores)."""

    def __init__(self, root: StoreURI, opener: Opener,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.root, self.opener, self.clock = root, opener, clock
        self._seen: dict[StoreURI, float] = {}

    async def check(self, located: Located, project_id: str) -> None:
        """Refuse the first (field, URI) whose bucket is missing (422) or out of the
        exchange's reach (403); `StoreUnavailable` (503) when the store cannot say."""
        for field, uri in located:
            if uri.root != self.root and not self._fresh(uri.root):
                await self._probe(field, uri, project_id)
                self._seen[uri.root] = self.clock()

    def _fresh(self, bucket: StoreURI) -> bool:
        seen = self._seen.get(bucket)
        return seen is not None and self.clock() - seen < KEEP_S

    async def _probe(self, field: str, uri: StoreURI, project_id: str) -> None:
        home = home_uri(self.root, project_id)
        try:
            await self.opener(uri).probe()
        except ObjectNotFound:
            raise InvalidInput(f"{field}: bucket {uri.bucket} does not exist in the "
                               "exchange's store", field=field,
                               hint=f"write below your project's home, e.g. {home}, or ask "
                                    f"the exchange's operator to create {uri.root}") from None
        except AccessDenied:
            raise Forbidden(f"{field}: the exchange's store key does not reach bucket "
                            f"{uri.bucket}", hint=f"write below {home}, or ask the operator "
                            "to grant the exchange's key that bucket") from None
        except StoreUnavailable as exc:
            raise StoreUnavailable(f"{field}: cannot check bucket {uri.bucket}: {exc.message}",
                                   hint="retry in a moment") from None


def written(spec: JobSpec) -> Iterator[tuple[str, StoreURI]]:
    """(field, URI) of what a job writes, where the URI parses as s3:// (the rest is refused,
    with its reason, by ``check_spec``)."""
    pairs = [(f"outputs.{n}", u) for n, u in spec.outputs.items()]
    if spec.checkpoint is not None:
        pairs.append(("checkpoint", spec.checkpoint))
    for field, text in pairs:
        try:
            uri = parse_uri(text, field=field)
        except InvalidInput:
            continue
        if uri.scheme == "s3":
            yield field, uri
