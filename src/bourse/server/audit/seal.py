"""The audit chain's sealed head: how far the chain went, kept where a database writer cannot
reach it.

The hash chain in the database shows an edited, inserted or removed row, but not a cut end: a
database writer who deletes the newest rows and moves the head row back leaves a shorter chain
that is whole. So the coordinator also keeps the (seq, hash) of the last record it committed in
``<data dir>/audit.seal`` (mode 0600), with an HMAC under a subkey of the server key, rewritten
in place after every commit of audit records: one ``pwrite`` of a fixed-size line on a file
kept open. ``bourse audit verify`` then finds a chain that ends before the seal, or whose row
at the seal's seq is not the one sealed (docs/security.md says what that does and does not
prove).

The seal only moves forward, and only over a chain that continues it: the writer checks, in
the transaction that locks the head, that the head it builds on is the sealed one (or, when
other replicas wrote meanwhile, that the sealed row is still in place); a cut chain keeps its
old seal, so new records cannot cover the cut.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from bourse.core.errors import BourseError

log = logging.getLogger(__name__)
SEAL_FILE = "audit.seal"
LINE_BYTES = 256  # every seal is padded to this size and written over the last, in place


class SealError(BourseError):
    """The seal is missing, damaged, or not made with this server key."""


@dataclass(frozen=True)
class Seal:
    """The chain up to row ``seq``, whose hash is ``hash`` (row 0: the genesis hash)."""

    seq: int
    hash: str


class Sealer:
    """Seals to and from their line, under one key (keyed once: a seal is written per
    commit)."""

    def __init__(self, key: bytes) -> None:
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)

    def mac(self, seal: Seal) -> str:
        mac = self._keyed.copy()
        mac.update(f"audit-seal/{seal.seq}/{seal.hash}".encode())
        return mac.hexdigest()

    def encode(self, seal: Seal) -> bytes:
        # JSON written by hand: chain hashes are hex, and json.dumps costs more than the rest
        line = f'{{"seq": {seal.seq:d}, "hash": "{seal.hash}", "mac": "{self.mac(seal)}"}}'
        return line.ljust(LINE_BYTES - 1).encode() + b"\n"

    def decode(self, data: bytes) -> Seal:
        try:
            fields = json.loads(data)
            seal = Seal(seq=int(fields["seq"]), hash=str(fields["hash"]))
            mac = str(fields["mac"])
        except (ValueError, TypeError, KeyError):
            raise SealError("the audit seal is damaged",
                            hint="someone wrote to it, or the machine lost power while it "
                                 "was written") from None
        if not hmac.compare_digest(mac, self.mac(seal)):
            raise SealError("the audit seal was not made with this server key",
                            hint="someone wrote to it, or it comes from another exchange")
        return seal


class SealFile:
    """``<data dir>/audit.seal``: read at start and by ``verify``, written after commits."""

    def __init__(self, path: Path, key: bytes) -> None:
        self.path, self._sealer = path, Sealer(key)
        self._fd: int | None = None

    def read(self) -> Seal:
        """The seal on disk; SealError when there is none or it does not check."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise SealError(f"the audit seal {self.path} is missing",
                            hint="it was removed: the end of the trail cannot be checked "
                                 "until the coordinator restarts and seals it again") from None
        return self._sealer.decode(data)

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, seal: Seal) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        os.pwrite(self._fd, self._sealer.encode(seal), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def seal_problems(seal: Seal, ended: int, hash_at_seal: str | None) -> list[str]:
    """What a chain that ends at row ``ended``, whose row ``seal.seq`` has the hash
    ``hash_at_seal`` (None: no such row), says against the seal."""
    if ended < seal.seq:
        first = ended + 1
        rows = f"row {first} is" if first == seal.seq else f"rows {first}..{seal.seq} are"
        return [f"{rows} missing from the end: the chain ends at row {ended}, but the "
                f"coordinator sealed it at row {seal.seq} (the end of the trail was cut)"]
    if hash_at_seal != seal.hash:
        return [f"row {seal.seq} is not the row the coordinator sealed: the chain was "
                "rewritten up to it"]
    return []
