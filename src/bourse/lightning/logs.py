"""The checkpoints Lightning saved by itself (its default ``ModelCheckpoint``, in
``lightning_logs/version_<n>/checkpoints/``), as the node kept them: each attempt's
``lightning_logs/`` below ``BOURSE_LIGHTNING_LOGS_URI<attempt>/`` (`bourse.agent.kept`).

`newest` picks the one to resume from: of the latest attempt that saved one, ``last.ckpt``
(``save_last``) if it is there, else the highest ``step=<n>`` in a name (Lightning's default
names are ``epoch=<e>-step=<n>.ckpt``). Attempts count first because a resumed attempt goes on
from the step the one before reached: its checkpoints are the newer ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from bourse.core.uri import parse_uri
from bourse.storage.store import ObjectInfo, Opener

SUFFIX = ".ckpt"
_STEP = re.compile(r"step=(\d+)")


def rank(prefix: str, key: str) -> tuple[int, bool, int, str]:
    """How new the checkpoint at ``key`` (below the kept prefix ``prefix``) is."""
    attempt, _, rest = key.removeprefix(prefix).partition("/")
    name = rest.rsplit("/", 1)[-1]
    step = _STEP.search(name)
    return (int(attempt) if attempt.isdigit() else -1, name == "last" + SUFFIX,
            int(step.group(1)) if step else -1, key)


def newest(prefix: str, objects: Sequence[ObjectInfo]) -> ObjectInfo | None:
    found = [o for o in objects if o.key.endswith(SUFFIX)]
    return max(found, key=lambda o: rank(prefix, o.key)) if found else None


async def download_newest(opener: Opener, uri: str, into: Path) -> str | None:
    """The newest checkpoint below the kept ``lightning_logs`` prefix ``uri``, downloaded
    into ``into``; None when no attempt left one."""
    root = parse_uri(uri, field="lightning_logs").as_prefix()
    store = opener(root)
    latest = newest(root.key, await store.list(root.key))
    if latest is None:
        return None
    target = into / latest.key.rsplit("/", 1)[-1]
    target.write_bytes(bytes(await store.get(latest.key)))
    return str(target)
