"""``cache=True``: an identical stage call reuses the previous result instead of running.

Identical means the same project code (the hash of its bundle), the same stage (class and
settings), the same arguments and the same inputs — inputs are named by URI, and every
output of a bourse stage gets a URI of its own, so a changed upstream stage changes the key.
Results are remembered per project in ``.bourse/cache/``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from bourse.app.call import Call
from bourse.app.data import Data
from bourse.app.result import Result


def cache_key(call: Call, code: str) -> str:
    blob = json.dumps({"code": code, "command": call.command, "env": call.env,
                       "inputs": call.inputs, "outputs": list(call.outputs)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


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
