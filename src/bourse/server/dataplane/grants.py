"""Store credentials for users (``bourse cp``, ``ls``, ``rm``): the same issuer and scope
policy as an attempt's, for the caller's project instead of a job.

A user asks for what a command needs — read some URIs, write below others — and gets a key
that can do exactly that and expires after a TTL (at most `MAX_GRANT_TTL_S`), never the
store's root key. What may be asked for follows the jobs' rules: ``check_spec``'s reserved
prefixes (pure, here: `asked`), then ``services.claims`` (other projects' claims and homes;
written prefixes are claimed for the caller's project, as a job's outputs are). Each grant is
an identity of its own, ``bourse.u<id>.0.<expiry>``: the sweeper deletes it at its expiry
like an attempt's, and ``DELETE /data/credentials/{id}`` revokes it before (a command that
is done says so).
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from bourse.core.errors import InvalidInput
from bourse.core.uri import StoreURI, parse_uri
from bourse.protocol.api import DataGrant
from bourse.server.dataplane.plan import check_read, check_write, store_access
from bourse.storage.credentials import CredentialIssuer, ScopedCredentials
from bourse.storage.errors import StorageError
from bourse.storage.settings import StoreSettings

log = logging.getLogger(__name__)
KEPT = 10_000  # grants remembered for early revocation; older ones just expire
Located = list[tuple[str, StoreURI]]


@dataclass(frozen=True)
class Asked:
    """A grant request checked: (field, URI) of what is read and what is written."""

    read: Located
    write: Located

    @property
    def buckets(self) -> set[StoreURI]:
        return {uri.root for _, uri in (*self.read, *self.write)}

    def locations(self, which: Located) -> Located:
        """The URIs as locations (an object ``k`` counts as ``k/``), for claims."""
        return [(field, uri.as_prefix()) for field, uri in which]


def asked(read: Sequence[str], write: Sequence[str], root: StoreURI) -> Asked:
    """Parse and check what a user asks to read and write (pure): ``s3://`` only, nothing
    of the exchange's own prefixes (a project's own jobs' ``jobs/<id>/`` may be read)."""
    if not read and not write:
        raise InvalidInput("ask for at least one URI to read or write", field="read",
                           hint='e.g. {"read": ["s3://bourse/projects/<project>/data/"]}')
    found = Asked(_parsed("read", read), _parsed("write", write))
    for field, uri in found.read:
        check_read(field, uri, root)
    for field, uri in found.write:
        check_write(field, uri, root)
    return found


def _parsed(name: str, texts: Sequence[str]) -> Located:
    located = []
    for index, text in enumerate(texts):
        field = f"{name}[{index}]"
        uri = parse_uri(text, field=field)
        if uri.scheme != "s3":
            raise InvalidInput(f"{field}: {text} is not an s3:// URI; the exchange's "
                               "credentials cover its S3 store only", field=field,
                               hint="name data in the exchange's store (s3://...)")
        if not uri.key:
            raise InvalidInput(f"{field}: {text} names a whole bucket", field=field,
                               hint=f"name a prefix in it, e.g. {uri.join('data/')}")
        located.append((field, uri))
    return located


def new_grant_id() -> str:
    """``u`` and 20 hex digits: an identity name `credentials.job_key` keeps as it is."""
    return "u" + secrets.token_hex(10)


class UserGrants:
    """Issues and revokes users' credentials; remembers which project each grant is of, so
    only that project can revoke it (forgotten on restart: those expire)."""

    def __init__(self, issuer: CredentialIssuer) -> None:
        self.issuer = issuer
        self.owners: OrderedDict[str, str] = OrderedDict()

    async def issue(self, grant_id: str, project_id: str, found: Asked,
                    ttl: timedelta) -> ScopedCredentials:
        credentials = await self.issuer.issue(
            grant_id, 0, [u for _, u in found.read], [u for _, u in found.write], ttl=ttl)
        self.owners[grant_id] = project_id
        while len(self.owners) > KEPT:
            self.owners.popitem(last=False)
        log.info("issued store credentials %s to project %s", credentials.identity,
                 project_id)
        return credentials

    async def revoke(self, grant_id: str, project_id: str) -> bool:
        """Revoke one of ``project_id``'s grants; False when it has none of that id."""
        if self.owners.get(grant_id) != project_id:
            return False
        del self.owners[grant_id]
        try:
            await self.issuer.revoke(grant_id, 0)
        except StorageError as exc:
            log.warning("could not revoke store credentials %s (%s); they expire by "
                        "themselves", grant_id, exc.message)
        return True


def grant_view(grant_id: str, settings: StoreSettings,
               credentials: ScopedCredentials) -> DataGrant:
    scope = credentials.scope
    return DataGrant(id=grant_id, read=[str(u) for u in scope.read],
                     write=[str(u) for u in scope.write],
                     store=store_access(settings, credentials))
