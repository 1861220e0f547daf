"""Local paths as job inputs (``bourse run --input data=./dataset/``, a task file's
``inputs:``): each is uploaded once to the project's home, at a prefix named by the digest
of what it holds, and the job gets that ``s3://`` URI.

The same files give the same prefix, so a second run with unchanged data uploads nothing
(every object is already there with its size: `PlanOptions.trust_size`); changed data gets a
prefix of its own, and jobs that read the old one keep reading what they were given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bourse.core.errors import InvalidInput
from bourse.sdk.client import Client
from bourse.sdk.data import copy, granted
from bourse.storage.copyplan import Place, Plan, PlanOptions
from bourse.storage.errors import TransferFailed
from bourse.storage.etag import tree_digest
from bourse.storage.transfer import TransferResult
from bourse.storage.upload import local_files

INPUTS = "inputs/"
Report = Callable[[str, Plan, TransferResult], None]  # (input name, plan, outcome)


def is_local(value: str) -> bool:
    """An input that names a local path rather than a store URI."""
    return "://" not in value


@dataclass(frozen=True)
class LocalInput:
    name: str
    path: Path
    prefix: str  # s3://<bucket>/projects/<project>/inputs/<digest>/

    @property
    def uri(self) -> str:
        """What the job reads: the prefix, or the one object a file became."""
        return self.prefix if self.path.is_dir() else self.prefix + self.path.name


def local_input(name: str, value: str, home: str, base: Path) -> LocalInput:
    path = (base / Path(value).expanduser()).resolve()
    field = f"inputs.{name}"
    if not path.exists():
        raise InvalidInput(f"{field}: {value} is neither a store URI nor a local path that "
                           "exists", field=field,
                           hint="write s3://bucket/prefix, or the path of a file or directory")
    files = local_files(path)
    if not files:
        raise InvalidInput(f"{field}: {value} holds no files", field=field)
    return LocalInput(name, path, f"{home}{INPUTS}{tree_digest(files)}/")


def resolve_local_inputs(client: Client, inputs: Mapping[str, str], *,
                         base: Path | None = None,
                         report: Report | None = None) -> dict[str, str]:
    """``inputs`` with every local path (relative to ``base``, the working directory by
    default) uploaded and replaced by its URI in the store; store URIs are kept as they are."""
    local = {n: v for n, v in inputs.items() if is_local(v)}
    if not local:
        return dict(inputs)
    home = client.data_home().home
    found = [local_input(n, v, home, base or Path.cwd()) for n, v in local.items()]
    with granted(client, write=sorted({i.prefix for i in found})) as stores:
        for item in found:
            plan, result = asyncio.run(copy(stores, Place.of(str(item.path)),
                                            Place.of(item.prefix, "dest"),
                                            plan_options=PlanOptions(recursive=True,
                                                                     trust_size=True)))
            if result.failures:
                raise TransferFailed(
                    f"inputs.{item.name}: {len(result.failures)} file(s) could not be "
                    f"uploaded: {next(iter(result.failures.values()))}",
                    failures=result.failures, hint="run it again: what went up is kept")
            if report is not None:
                report(item.name, plan, result)
    return {**inputs, **{i.name: i.uri for i in found}}
