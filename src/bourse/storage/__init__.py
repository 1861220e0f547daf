"""The data plane: object-store URIs and stores, the embedded SeaweedFS, job-scoped
credentials, the node's input cache with prefetch, and uploads of outputs and checkpoints.
See docs/storage.md.

The object stores (``RemoteStore``, ``Stores``, ``open_store``) load on first use: they need
obstore, which the client install lacks (bourse.extras), and the client imports the pure
parts of this package (``jobenv``, ``errors``).
"""

from typing import TYPE_CHECKING, Any

from bourse.core.uri import StoreURI, parse_uri
from bourse.storage.cache import ContentCache
from bourse.storage.checkpoint import Checkpoint, latest_complete, list_complete, save_checkpoint
from bourse.storage.credentials import (
    DEFAULT_TTL,
    CredentialIssuer,
    MemoryIssuer,
    Scope,
    ScopedCredentials,
    scope_policy,
)
from bourse.storage.errors import (
    AccessDenied,
    CacheFull,
    CredentialError,
    InvalidURI,
    ObjectNotFound,
    SeaweedError,
    StorageError,
    StoreUnavailable,
    TransferFailed,
)
from bourse.storage.jobenv import CHECKPOINT_VAR, default_checkpoint, input_var, job_env, output_var
from bourse.storage.memory import MemoryStore
from bourse.storage.prefetch import Prefetcher, PrefetchOptions, PrefetchResult
from bourse.storage.progress import Progress, ProgressMeter, format_bytes
from bourse.storage.retry import RetryPolicy
from bourse.storage.seaweed import SeaweedServer, TLSFiles, find_weed
from bourse.storage.seaweed_iam import SeaweedIssuer
from bourse.storage.settings import AccessKey, StoreSettings
from bourse.storage.store import ObjectInfo, ObjectStore, Opener
from bourse.storage.sts import StsIssuer
from bourse.storage.upload import UploadOptions, UploadResult, upload

if TYPE_CHECKING:
    from bourse.storage.remote import RemoteStore, Stores, open_store
else:
    _REMOTE = frozenset({"RemoteStore", "Stores", "open_store"})

    def __getattr__(name: str) -> Any:
        if name in _REMOTE:
            from bourse.storage import remote

            return getattr(remote, name)
        raise AttributeError(f"module 'bourse.storage' has no attribute {name!r}")

__all__ = [
    "CHECKPOINT_VAR", "DEFAULT_TTL", "AccessDenied", "AccessKey", "CacheFull", "Checkpoint",
    "ContentCache", "CredentialError", "CredentialIssuer", "InvalidURI", "MemoryIssuer",
    "MemoryStore", "ObjectInfo", "ObjectNotFound", "ObjectStore", "Opener", "PrefetchOptions",
    "PrefetchResult", "Prefetcher", "Progress", "ProgressMeter", "RemoteStore", "RetryPolicy",
    "Scope", "ScopedCredentials", "SeaweedError", "SeaweedIssuer", "SeaweedServer",
    "StorageError", "StoreSettings", "StoreURI", "StoreUnavailable", "Stores", "StsIssuer",
    "TLSFiles", "TransferFailed", "UploadOptions", "UploadResult", "default_checkpoint",
    "find_weed", "format_bytes", "input_var", "job_env", "latest_complete", "list_complete",
    "open_store", "output_var", "parse_uri", "save_checkpoint", "scope_policy", "upload",
]
