"""``cache=True``: an identical stage call reuses the previous result instead of running.

Identical means the same backend (local mode, or one exchange), the same project code (its
Python files: ``code_digest``), the same stage (class, settings and environment), the same
arguments and the same inputs — by URI and by what lies behind each URI: for ``file://``
inputs each file's path, size and modification time (``path_digest``), for object-store
inputs each object's key, size and ETag as the exchange's store lists them
(``bourse.storage.listing.content_digest``). The backend computes those digests; this module
is the pure key and the store of results, per project in ``.bourse/cache/``.

An entry also records the digests of the result's outputs when it was stored: a later hit
whose outputs were deleted or rewritten since is not reused.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from bourse.app.call import Call
from bourse.app.data import Data
from bourse.app.result import Result
from bourse.sdk.bundle import scan_dir

KEY_VERSION = 2  # 2: inputs keyed by what lies behind them in object stores too


def cache_key(call: Call, code: str, env: Mapping[str, str],
              inputs: Mapping[str, str]) -> str:
    """The key of a call; ``inputs`` maps each input's name to the digest of its data."""
    blob = json.dumps({"v": KEY_VERSION, "code": code, "command": call.command,
                       "env": {**env, **call.env},
                       "inputs": {n: [u, inputs[n]] for n, u in call.inputs.items()},
                       "outputs": list(call.outputs)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def code_digest(root: Path) -> str:
    """A hash of the project's Python code: the path and content of every ``.py`` file a
    bundle of ``root`` would hold. Other files are left out, because stages run in local mode
    write into the project (a log, a plot) and would change the key they are cached under;
    data a stage reads belongs in its inputs, which are keyed by what they hold."""
    digest = hashlib.sha256()
    for entry in scan_dir(root).entries:
        if entry.kind == "file" and entry.path.endswith(".py"):
            digest.update(f"{entry.path}\0".encode())
            digest.update(hashlib.sha256((root / entry.path).read_bytes()).digest())
    return digest.hexdigest()


def path_digest(top: Path) -> str:
    """What lies at a local path: each file's path, size and modification time (a missing
    path holds nothing)."""
    files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        info = path.stat()
        digest.update(f"{path.relative_to(top)}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class Entry:
    """A remembered result, and the digest of each of its outputs when it was stored."""

    result: Result
    outputs: dict[str, str]


class ResultCache:
    def __init__(self, root: Path) -> None:
        self.root = root / ".bourse" / "cache"

    def get(self, key: str) -> Entry | None:
        path = self.root / f"{key}.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        outputs = data.pop("output_digests", {})
        data["outputs"] = {k: Data(v) for k, v in data["outputs"].items()}
        return Entry(Result(**{**data, "cached": True}), outputs)

    def put(self, key: str, result: Result, outputs: Mapping[str, str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data = asdict(result) | {"outputs": {k: v.uri for k, v in result.outputs.items()},
                                 "output_digests": dict(outputs)}
        tmp = self.root / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data, default=str))
        os.replace(tmp, self.root / f"{key}.json")
