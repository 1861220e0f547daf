"""``cache=True``: an identical stage call reuses the previous result instead of running.

Identical means the same backend (local mode, or one exchange), the same project code (its
Python files: ``code_digest``), the same stage (class, settings and environment), the same
arguments and the same inputs. Inputs are named by URI, and ``file://`` inputs also by what
lies behind them (each file's path, size and modification time), so editing one's own data
runs the stage again; every output of a bourse stage gets a URI of its own, so a changed
upstream stage changes the key. Object-store inputs of one's own are keyed by URI only: write
new data under a new URI. Results are remembered per project in ``.bourse/cache/``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from bourse.app.call import Call
from bourse.app.data import Data
from bourse.app.result import Result
from bourse.sdk.bundle import scan_dir
from bourse.storage.uri import parse_uri


def cache_key(call: Call, code: str, env: Mapping[str, str]) -> str:
    blob = json.dumps({"code": code, "command": call.command, "env": {**env, **call.env},
                       "inputs": {n: [u, data_digest(u)] for n, u in call.inputs.items()},
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


def data_digest(uri: str) -> str | None:
    """What lies behind a ``file://`` URI (paths, sizes, modification times); None for an
    object-store URI."""
    parsed = parse_uri(uri, field="input")
    if parsed.scheme != "file":
        return None
    top = Path("/" + parsed.key)
    files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for path in files:
        info = path.stat()
        digest.update(f"{path.relative_to(top)}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


class ResultCache:
    def __init__(self, root: Path) -> None:
        self.root = root / ".bourse" / "cache"

    def get(self, key: str) -> Result | None:
        path = self.root / f"{key}.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        data["outputs"] = {k: Data(v) for k, v in data["outputs"].items()}
        return Result(**{**data, "cached": True})

    def put(self, key: str, result: Result) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data = asdict(result) | {"outputs": {k: v.uri for k, v in result.outputs.items()}}
        tmp = self.root / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data, default=str))
        os.replace(tmp, self.root / f"{key}.json")
