"""``Service``: a service in Python, with the fields of a task file's ``service:`` section.

    from bourse import Compute, Service
    from bourse.app import Replicas, Rollout

    digits = Service("digits", "python serve.py --port $PORT", port=8000,
                     compute=Compute(cpus=1), readiness="/health",
                     replicas=Replicas(min=2, max=4, target_rps=50),
                     rollout=Rollout(steps=[10, 50, 100], pause="1m", min_requests=100))
    view = digits.apply()   # the first time: starts it; changed: a rollout (docs/serving.md)

Every field is checked when the ``Service`` is made, by the task file's own models
(``tasks.service``), so a bad one is refused with the same message as in a file. ``apply``
packs the project's code as a stage's is and applies the version as ``bourse serve`` does
(``tasks.serving``): the same version applied again changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.protocol.services import SERVICE_NAME_PATTERN, ServiceApply, ServiceView
from bourse.tasks.model import Task
from bourse.tasks.service import Readiness, Replicas, Rollout
from bourse.tasks.service import Service as Section
from bourse.tasks.serving import apply_body

if TYPE_CHECKING:
    from bourse.sdk.client import Client

EnvValue = str | int | float | bool


class Service:
    """A service's version: ``command`` (a bash script, or an argv) run by each replica,
    which serves HTTP on ``$PORT`` (``port`` or the next free one above it); ``compute``
    per replica; ``readiness`` a path or a :class:`Readiness`; ``replicas`` a count or
    :class:`Replicas` (min, max, ``target_rps``, ``target_p99``); ``rollout`` a
    :class:`Rollout` (steps, pause, rollback rules). ``env``, ``secrets``, ``setup`` and
    ``max_retries`` are the task file's."""

    def __init__(self, name: str, command: str | Sequence[str], *, port: int,
                 compute: Compute | str, readiness: str | Readiness | None = None,
                 replicas: int | Replicas = 1, rollout: Rollout | None = None,
                 env: Mapping[str, EnvValue] | None = None, secrets: Sequence[str] = (),
                 setup: str | None = None, max_retries: int | None = None) -> None:
        self.name = name
        self.compute = _compute(name, compute)
        self.task = _task(name, {
            "name": name, "run": command if isinstance(command, str) else list(command),
            "env": dict(env or {}), "secrets": list(secrets), "setup": setup,
            "max_retries": max_retries,
            "service": {"port": port, "readiness": readiness, "replicas": replicas,
                        "rollout": rollout if rollout is not None else Rollout()}})
        _check(name, self)

    @property
    def section(self) -> Section:
        """The ``service:`` section it amounts to."""
        assert self.task.service is not None
        return self.task.service

    def body(self, bundle: str | None = None) -> ServiceApply:
        """The version as applied, with the code bundle ``bundle`` (a SHA-256) if any."""
        return apply_body(f"Service {self.name!r}", self.task, bundle, self.compute)

    def apply(self, client: Client | None = None, *, project: Path | str | None = None,
              code: bool = True) -> ServiceView:
        """Apply this version on the exchange (``client``, else the configured one): the
        project's code (``project``, else the current directory) packed and uploaded
        unless ``code`` is False. Returns the service as the coordinator has it."""
        from bourse.app.exchange import upload_bundle
        from bourse.sdk.client import Client

        owned = client is None
        client = client or Client()
        try:
            bundle = upload_bundle(client, Path(project or Path.cwd()).resolve()) \
                if code else None
            return client.apply_service(self.body(bundle))
        finally:
            if owned:
                client.close()

    def __repr__(self) -> str:
        return f"Service({self.name!r}, port={self.section.port}, compute={self.compute!r})"


def _compute(name: str, compute: Any) -> Compute:
    if isinstance(compute, str):
        return Compute(compute)
    if not isinstance(compute, Compute):
        raise InvalidInput(f"service {name!r}: compute must be a Compute, got "
                           f"{type(compute).__name__}", field="compute",
                           hint='e.g. compute=Compute(cpus=1) or Compute("l4")')
    return compute


def _task(name: str, fields: dict[str, Any]) -> Task:
    """The task the fields make, or InvalidInput naming the first field that is wrong."""
    if not isinstance(name, str) or not re.match(SERVICE_NAME_PATTERN, name):
        raise InvalidInput(f"service name {name!r} is not lower case letters, digits and -",
                           field="name", hint="e.g. Service(\"digits\", ...), at most 63")
    try:
        return Task.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise _invalid(name, exc) from None


def _check(name: str, service: Service) -> None:
    """What only the coordinator's units refuse (a port under 1024...), refused now."""
    try:
        service.body()
    except ValidationError as exc:
        raise _invalid(name, exc) from None


def _invalid(name: str, exc: ValidationError) -> InvalidInput:
    error = exc.errors()[0]
    loc = [str(p) for p in error["loc"] if "[" not in str(p)]  # not pydantic's type tags
    if loc[:1] in (["service"], ["policy"]):
        loc = loc[1:]
    elif loc[:1] == ["run"]:
        loc = ["command"]
    where = ".".join(loc) or None
    return InvalidInput(f"service {name!r}: {where or 'its fields'}: {error['msg']}",
                        field=where, hint="docs/serving.md says what each field takes")


__all__ = ["Readiness", "Replicas", "Rollout", "Service"]
