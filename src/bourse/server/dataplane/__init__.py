"""The coordinator's data plane: the store it runs or reaches, job-scoped credentials per
attempt, and the data plan each StartJob carries (see docs/storage.md)."""

from bourse.server.dataplane.plan import check_spec, resolve_spec
from bourse.server.dataplane.plane import DataPlane, Failure
from bourse.server.dataplane.setup import open_dataplane

__all__ = ["DataPlane", "Failure", "check_spec", "open_dataplane", "resolve_spec"]
