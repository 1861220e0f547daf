"""Signed, short-lived download links (pure: no I/O, ``now`` is given).

A link is ``/ui/download/<token>``; the token is a `Grant` (what to download, for which
project, until when) and an HMAC-SHA256 of it keyed with the server key's ``ui-download``
subkey. The page that shows a link makes it at render time, after the job's scope check; the
route that serves it checks the signature and the expiry here, then checks again that the
session sees the grant's project and that the project may read what it names (the
data plane's rules at the time of the download, not of the render). The link alone downloads
nothing: the route is behind the session cookie too, so one copied into a chat or a log is
no use to anyone but the user it was shown to, and to them for ``TTL_S`` only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from enum import Enum

from bourse.core.errors import Forbidden, InvalidInput
from bourse.server.files import keys

TTL_S = 600  # a link lasts ten minutes: long enough to click, too short to be worth leaking
PATH = "/ui/download/"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
RENEW_HINT = "reload the job page for a fresh link"


class Kind(Enum):
    OBJECT = "object"  # a store URI: one object, or a prefix whose objects are listed
    LOG = "log"  # a job's archived log (target: the job's id)
    ARTIFACT = "artifact"  # a tracked run's artifact (target: ``<run>/<relative path>``)


@dataclass(frozen=True)
class Grant:
    kind: Kind
    target: str
    project: str
    expires: int  # seconds since the epoch

    def payload(self) -> bytes:
        return json.dumps({"k": self.kind.value, "t": self.target, "p": self.project,
                           "e": self.expires}, separators=(",", ":")).encode()


def signing_key(server_key: bytes) -> bytes:
    """The links' key: the server key's ``ui-download`` subkey."""
    return keys.subkey(server_key, "ui-download")


def grant(kind: Kind, target: str, project: str, now: float, ttl_s: int = TTL_S) -> Grant:
    return Grant(kind, target, project, int(now) + ttl_s)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, body: str) -> str:
    return _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())


def sign(key: bytes, found: Grant) -> str:
    """The token of ``found``: its payload and its HMAC, both base64url, joined by a dot."""
    body = _b64(found.payload())
    return f"{body}.{_mac(key, body)}"


def url(key: bytes, found: Grant) -> str:
    return PATH + sign(key, found)


def verify(key: bytes, token: str, now: float) -> Grant:
    """The grant a token carries; Forbidden when it was not signed with ``key`` (forged or
    tampered with) or has expired."""
    body, _, mac = token.partition(".")
    if not mac or not hmac.compare_digest(mac, _mac(key, body)):
        raise Forbidden("this download link is not valid", hint=RENEW_HINT)
    found = _parse(body)
    if now >= found.expires:
        raise Forbidden("this download link has expired", hint=RENEW_HINT)
    return found


def _parse(body: str) -> Grant:
    """A signed payload: ours, so a malformed one means a key shared with another writer."""
    try:
        fields = json.loads(_unb64(body))
        return Grant(Kind(fields["k"]), str(fields["t"]), str(fields["p"]),
                     int(fields["e"]))
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise Forbidden("this download link is not valid", hint=RENEW_HINT) from exc


def artifact_target(run_id: str, relative: str) -> str:
    """An ARTIFACT grant's target: the run and the path under its artifacts. A path that would
    leave the run's place (empty, ``.`` or ``..`` parts) or a run id holding ``/`` cannot be
    made into one."""
    if run_id in ("", ".", "..") or "/" in run_id:
        raise InvalidInput(f"not a run id: {run_id[:64]!r}")
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidInput(f"an artifact path may not be empty or hold empty, '.' or '..' "
                           f"parts: {relative[:80]!r}")
    return f"{run_id}/{relative}"


def artifact_of(target: str) -> tuple[str, str]:
    """The run and the relative path an ARTIFACT grant names, checked as `artifact_target`
    checks them (a signed target is ours, but the check costs nothing)."""
    run_id, _, relative = target.partition("/")
    artifact_target(run_id, relative)
    return run_id, relative


TEXT_SUFFIXES = frozenset({"txt", "log", "csv", "tsv", "json", "jsonl", "yaml", "yml", "md",
                           "toml", "ini", "cfg"})


def media_type(filename: str) -> str:
    """``text/plain`` for a file obviously text by its suffix (never HTML or SVG: a page of the
    exchange's origin would run what it holds), else ``application/octet-stream``."""
    suffix = filename.rpartition(".")[2].lower() if "." in filename else ""
    return "text/plain; charset=utf-8" if suffix in TEXT_SUFFIXES else \
        "application/octet-stream"


def safe_filename(key: str, fallback: str = "download") -> str:
    """The last part of an object's key as a file name a browser may save under: letters,
    digits, ``.``, ``_`` and ``-`` only, never hidden or empty."""
    name = _UNSAFE.sub("_", key.rstrip("/").rpartition("/")[2]).strip("._")[:200]
    return name or fallback


def attachment(filename: str) -> str:
    """A ``Content-Disposition`` for a file from `safe_filename` (nothing to quote in it)."""
    return f'attachment; filename="{filename}"'
