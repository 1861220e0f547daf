"""The Python SDK: submit jobs, follow their logs, list nodes (``Client``, ``AsyncClient``).

A view's ``state`` is a member of ``JobState``, ``AttemptState`` or ``NodeState`` (each equal
to its string: ``job.state == "SUCCEEDED"`` holds too).
"""

from bourse.core.states import AttemptState, JobState, NodeState
from bourse.sdk.async_client import AsyncClient
from bourse.sdk.bundle import Bundle, pack
from bourse.sdk.client import Client
from bourse.sdk.config import Credentials, load_credentials, save_credentials
from bourse.sdk.errors import (
    ApiError,
    ApiInvalidInput,
    ApiNotFound,
    BundleTooLarge,
    Conflict,
    Forbidden,
    NotConfigured,
    ProtocolError,
    ServerError,
    TooLarge,
    Unauthorized,
    Unreachable,
    WaitTimeout,
)
from bourse.sdk.logs import LogDecoder

__all__ = [
    "ApiError",
    "ApiInvalidInput",
    "ApiNotFound",
    "AsyncClient",
    "AttemptState",
    "Bundle",
    "BundleTooLarge",
    "Client",
    "Conflict",
    "Credentials",
    "Forbidden",
    "JobState",
    "LogDecoder",
    "NodeState",
    "NotConfigured",
    "ProtocolError",
    "ServerError",
    "TooLarge",
    "Unauthorized",
    "Unreachable",
    "WaitTimeout",
    "load_credentials",
    "pack",
    "save_credentials",
]
