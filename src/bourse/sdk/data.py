"""Data in and out of the exchange's store with the caller's own short-lived credentials
(``bourse cp``, ``ls``, ``rm`` and local inputs): never the store's root key.

`granted` asks the exchange for credentials scoped to what a command reads and writes
(``POST /data/credentials``), hands back the store settings they make, and revokes them when
the command is done; `copy` plans and runs a copy with them (``bourse.storage.copyplan``,
``bourse.storage.transfer``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from bourse.protocol.api import DataGrant
from bourse.sdk.client import Client
from bourse.sdk.errors import ApiError, Unreachable
from bourse.storage.copyplan import Place, Plan, PlanOptions, plan_copy
from bourse.storage.remote import Stores
from bourse.storage.settings import AccessKey, StoreSettings
from bourse.storage.transfer import Transfer, TransferOptions, TransferResult

DEFAULT_TTL_S = 3600.0


def grant_settings(grant: DataGrant) -> StoreSettings:
    """The store settings of a grant: its endpoint and its key."""
    store = grant.store
    return StoreSettings(endpoint=store.endpoint, region=store.region,
                         path_style=store.path_style,
                         access_key=AccessKey(store.access_key_id, store.secret_access_key,
                                              store.session_token))


@contextlib.contextmanager
def granted(client: Client, read: Sequence[str] = (), write: Sequence[str] = (), *,
            ttl_s: float = DEFAULT_TTL_S) -> Iterator[Stores]:
    """Stores opened with credentials that read ``read`` and write below ``write``; they are
    revoked on the way out (and expire after ``ttl_s`` whatever happens)."""
    grant = client.data_credentials(read, write, ttl_s)
    stores = Stores(grant_settings(grant))
    try:
        yield stores
    finally:
        stores.close()
        with contextlib.suppress(ApiError, Unreachable):  # it expires anyway
            client.revoke_data_credentials(grant.id)


def needs(source: Place, dest: Place) -> tuple[list[str], list[str]]:
    """(read, write): the URIs a copy from ``source`` to ``dest`` must be granted."""
    read = [str(source.uri)] if source.uri is not None else []
    write = [str(dest.uri)] if dest.uri is not None else []
    return read, write


async def copy(stores: Stores, source: Place, dest: Place, *,
               plan_options: PlanOptions | None = None,
               options: TransferOptions | None = None,
               transfer: Transfer | None = None) -> tuple[Plan, TransferResult]:
    """Plan the copy (what is there already is skipped) and run it."""
    plan = await plan_copy(stores, source, dest, plan_options)
    runner = transfer or Transfer(stores, options)
    return plan, await runner.run(plan)
