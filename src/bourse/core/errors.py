"""The exception tree of bourse.

Every error a user can cause derives from :class:`BourseError` and says what was wrong and what
to do. The CLI maps them to exit codes and the server to HTTP statuses in one place each
(``bourse.cli.errors`` and ``bourse.server.errors``) by reading ``exit_code`` and
``http_status`` here. Each error is defined once, for both sides of the wire: the coordinator
raises these, and the SDK raises them again (as ``bourse.sdk.errors.ApiError`` subclasses of
the same classes) from the status the coordinator answered with.
"""

from __future__ import annotations


class BourseError(Exception):
    """Base class: a failure with a message written for the person who must act on it."""

    exit_code = 1
    http_status = 500

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} — {self.hint}"
        return self.message


class InvalidInput(BourseError, ValueError):
    """Input that cannot be understood: a bad label, flag, spec field or message.

    Also a ``ValueError``, so that pydantic reports one raised inside a nested model's
    validator with the full path of the field (``compute.cpus``).
    """

    exit_code = 2
    http_status = 422

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.field = field

    def __str__(self) -> str:
        text = super().__str__()
        return f"{self.field}: {text}" if self.field else text


class UnknownGpu(InvalidInput):
    """A GPU label that names no known model or family."""

    def __init__(self, label: str, suggestions: list[str]) -> None:
        hint = f"did you mean {' or '.join(suggestions)}?" if suggestions else (
            "run `bourse gpus` to list known GPUs"
        )
        super().__init__(f"unknown GPU {label!r}", field="gpu", hint=hint)
        self.label = label
        self.suggestions = suggestions


class NoMatch(BourseError):
    """A well-formed request that nothing satisfies (exit code 1, never silent)."""

    exit_code = 1
    http_status = 409


class NotFound(BourseError):
    exit_code = 1
    http_status = 404


class Unauthorized(BourseError):
    """No token, or one that is unknown, revoked or expired."""

    exit_code = 2
    http_status = 401


class Forbidden(BourseError):
    """The token's role may not do this (or the data is another project's)."""

    exit_code = 2
    http_status = 403


class Conflict(BourseError):
    """Conflicts with the current state."""

    exit_code = 1
    http_status = 409


class TooLarge(InvalidInput):
    """A body, bundle or frame over its limit."""

    exit_code = 2
    http_status = 413


class TooMany(BourseError):
    """A limit on what is open at once was reached: answered 429 with ``Retry-After``."""

    exit_code = 1
    http_status = 429

    def __init__(self, message: str, *, hint: str | None = None,
                 retry_after_s: int = 5) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s


class StorageError(BourseError):
    """An object store failed, or a store URI is wrong (``bourse.storage`` raises its
    subclasses; the URI grammar, ``core.uri``, raises ``InvalidURI``)."""

    http_status = 502
