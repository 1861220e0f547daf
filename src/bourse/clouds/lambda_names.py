"""The name a Lambda instance carries: the exchange's tags, in the one field Lambda keeps.

Lambda's launch takes no idempotency token, and ``GET /instances`` filters on nothing, so
the exchange id, the launch id and the node id are written into the instance's ``name``
(``bourse.x-3f9c2a1b7d4e.l-0a1b2c3d4e5f.n-5e6f7a8b9c0d``, 50 characters; Lambda allows 64,
``InstanceLaunchRequest.name`` in its OpenAPI document) and read back from it. The provider
looks a launch's name up before launching (a retried launch never makes two instances) and
lists only names of its own exchange (the reconciler never sees another's instances). Pure.
"""

from __future__ import annotations

import re

from bourse.clouds.base import TAG_EXCHANGE, TAG_LAUNCH, TAG_NODE

MAX_NAME = 64  # Lambda's limit on an instance name
PREFIX = "bourse"
_ID = re.compile(r"^[A-Za-z0-9-]{1,20}$")  # bourse's ids (``x-`` and 12 hex digits); no dot
_NAME = re.compile(r"^bourse\.([A-Za-z0-9-]{1,20})\.([A-Za-z0-9-]{1,20})\.([A-Za-z0-9-]{1,20})$")


def instance_name(exchange_id: str, launch_id: str, node_id: str) -> str:
    """The name of the instance of launch ``launch_id`` (ValueError when an id would not fit
    or could not be read back)."""
    for label, value in (("exchange id", exchange_id), ("launch id", launch_id),
                         ("node id", node_id)):
        if not _ID.match(value):
            raise ValueError(f"{label} {value!r} cannot go in a Lambda instance name: use 1-20 "
                             "letters, digits and '-'")
    name = f"{PREFIX}.{exchange_id}.{launch_id}.{node_id}"
    if len(name) > MAX_NAME:  # bourse's own ids (14 characters each) always fit
        raise ValueError(f"instance name {name!r} is over Lambda's {MAX_NAME} characters")
    return name


def tags_of(name: str | None) -> dict[str, str] | None:
    """The tags a bourse instance name stands for; None for any other name."""
    found = _NAME.match(name or "")
    if found is None:
        return None
    exchange, launch, node = found.groups()
    return {TAG_EXCHANGE: exchange, TAG_LAUNCH: launch, TAG_NODE: node}
