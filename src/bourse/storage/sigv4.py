"""AWS Signature Version 4 for S3 requests without a body (``GET``, ``HEAD``): pure, no I/O.

What `bourse.storage.direct` signs its requests with. The payload is ``UNSIGNED-PAYLOAD`` (S3
accepts it for any request; a GET has no payload anyway), so a signature needs four HMACs to
derive the day's key (kept per date, region and secret) and one over the request.
Reference: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import time
from collections.abc import Mapping
from urllib.parse import quote

from bourse.storage.settings import AccessKey

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED = "UNSIGNED-PAYLOAD"


def canonical_path(path: str) -> str:
    """An S3 request path as SigV4 wants it (and as it goes on the wire): every byte but the
    unreserved characters and ``/`` percent-encoded, once (S3 does not double-encode)."""
    return quote(path, safe="/")


@functools.lru_cache(maxsize=16)
def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def sign(method: str, host: str, path: str, headers: Mapping[str, str], key: AccessKey, *,
         region: str, service: str = "s3", now: float | None = None,
         payload: str = UNSIGNED) -> dict[str, str]:
    """``headers`` plus the ones that sign the request (``x-amz-date``,
    ``x-amz-content-sha256``, ``x-amz-security-token`` with a session token, and
    ``Authorization``). ``host`` is the ``Host`` header as sent (with a non-default port);
    ``path`` is already encoded (`canonical_path`); the request has no query string.
    ``payload``: the body's SHA-256 in hex, or ``UNSIGNED-PAYLOAD``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    signed = {k.lower(): str(v).strip() for k, v in headers.items()}
    signed |= {"host": host, "x-amz-date": stamp, "x-amz-content-sha256": payload}
    if key.session_token:
        signed["x-amz-security-token"] = key.session_token
    names = sorted(signed)
    listed = ";".join(names)
    request = "\n".join([method, path, "", "".join(f"{n}:{signed[n]}\n" for n in names),
                         listed, payload])
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope,
                         hashlib.sha256(request.encode()).hexdigest()])
    signature = hmac.new(signing_key(key.secret_access_key, stamp[:8], region, service),
                         to_sign.encode(), hashlib.sha256).hexdigest()
    signed.pop("host")
    signed["authorization"] = (f"{ALGORITHM} Credential={key.access_key_id}/{scope}, "
                               f"SignedHeaders={listed}, Signature={signature}")
    return signed


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()
