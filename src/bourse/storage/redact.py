"""Keeps secrets out of logs: botocore logs whole response bodies at DEBUG, and the bodies of
IAM CreateAccessKey and STS AssumeRole carry the new secret key and session token."""

from __future__ import annotations

import logging
import re

_SECRET_XML = re.compile(rb"<(SecretAccessKey|SessionToken)>[^<]*</\1>")
_SECRET_JSON = re.compile(rb'"(SecretAccessKey|SessionToken)"\s*:\s*"[^"]*"')


def redact(body: bytes) -> bytes:
    body = _SECRET_XML.sub(rb"<\1>[redacted]</\1>", body)
    return _SECRET_JSON.sub(rb'"\1": "[redacted]"', body)


class _RedactBodies(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Response body") and record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(redact(a) if isinstance(a, bytes) else a for a in args)
        return True


_FILTER = _RedactBodies()


def quiet_botocore() -> None:
    """Redact credentials from botocore's DEBUG response logging (idempotent)."""
    logger = logging.getLogger("botocore.parsers")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
