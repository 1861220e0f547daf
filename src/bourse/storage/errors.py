"""The storage exception tree: every failure says what was wrong and what to do about it."""

from __future__ import annotations

from bourse.core.errors import StorageError
from bourse.core.uri import InvalidURI

# the base and the URI grammar's error are the core's (``core.errors``, ``core.uri``)
__all__ = ["InvalidURI", "StorageError"]


class ObjectNotFound(StorageError):
    http_status = 404


class AccessDenied(StorageError):
    """The store refused the request: the credentials do not cover this bucket or prefix."""

    http_status = 403


def object_changed(what: object) -> StorageError:
    """An object replaced while it was downloading (its ETag or its size moved)."""
    return StorageError(f"{what} changed while it was downloading",
                        hint="retry the prefetch once the object stops changing")


class StoreUnavailable(StorageError):
    """A transient failure (connection refused, timeout, 5xx, throttling): worth retrying."""

    http_status = 503


class TransferFailed(StorageError):
    """A download or upload that failed after its retries; names the objects it could not move."""

    def __init__(self, message: str, *, failures: dict[str, str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.failures = failures


class CacheFull(StorageError):
    """The input cache (or the disk under it) cannot hold what a prefetch needs."""

    http_status = 507

    def __init__(self, message: str, *, path: str, needed: int, available: int,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path, self.needed, self.available = path, needed, available


class CredentialError(StorageError):
    """Job-scoped credentials could not be issued, renewed or revoked."""


class SeaweedError(StorageError):
    """The embedded SeaweedFS server could not be found, started or stopped."""


def aws_reason(exc: Exception) -> str:
    """``Code: Message`` of a botocore error (never its request, which may carry keys)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".strip()
    return type(exc).__name__
