"""Lambda Cloud behind the provider seam, over its REST API (``lambda_api``).

Lambda sells on-demand instances only (no spot, no zones): an offer is (region, instance
type) at the catalogue's price. Lambda has no tags the exchange can filter on and no
idempotency token, so the exchange's ids go into the instance's name (``lambda_names``); a
launch first looks its name up in ``GET /instances`` and returns the instance a previous
try made, so a retried launch (or a coordinator restarted between the call and its commit)
never makes two. Before ``POST /instance-operations/launch`` (limited to one call per 12 s)
the provider reads ``GET /instance-types``: a region that lists no capacity for the type is
a capacity failure without a launch call (the answer is kept ``capacity_ttl_s``, so failing
over through the regions costs one read). The launch carries the boot script as cloud-init
``user_data`` and the one SSH key Lambda requires (``ssh_key``, or the account's only key).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from bourse.clouds.base import (
    TAG_EXCHANGE,
    CloudCheck,
    CloudError,
    CloudState,
    Instance,
    LaunchSpec,
)
from bourse.clouds.lambda_api import NO_KEY, LambdaApi, api_key
from bourse.clouds.lambda_errors import INSUFFICIENT_CAPACITY, NOT_FOUND
from bourse.clouds.lambda_names import instance_name, tags_of
from bourse.core.launch import Failure


class LambdaStatus(StrEnum):
    """Lambda's instance statuses (OpenAPI ``InstanceStatus``): its words, not bourse's."""

    BOOTING = "booting"
    ACTIVE = "active"
    UNHEALTHY = "unhealthy"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    PREEMPTED = "preempted"


# Lambda's statuses in the seam's (EC2's) words
STATES: dict[str, CloudState] = {
    LambdaStatus.BOOTING: CloudState.PENDING, LambdaStatus.ACTIVE: CloudState.RUNNING,
    LambdaStatus.UNHEALTHY: CloudState.RUNNING,  # still billed: terminated like any live one
    LambdaStatus.TERMINATING: CloudState.SHUTTING_DOWN,
    LambdaStatus.TERMINATED: CloudState.TERMINATED,
    LambdaStatus.PREEMPTED: CloudState.TERMINATED}
_IMAGE_ID = re.compile(r"^[0-9a-f]{32}$")  # Lambda's ids; anything else is an image family
SSH_KEYS_URL = "https://cloud.lambda.ai/ssh-keys"


def launch_request(spec: LaunchSpec, *, name: str, ssh_key: str,
                   image: str | None) -> dict[str, Any]:
    """The body of ``POST /instance-operations/launch`` for ``spec`` (pure)."""
    body: dict[str, Any] = {"region_name": spec.region, "instance_type_name": spec.instance_type,
                            "ssh_key_names": [ssh_key], "name": name, "quantity": 1,
                            "user_data": spec.user_data}
    chosen = spec.image or image
    if chosen:
        body["image"] = {"id": chosen} if _IMAGE_ID.match(chosen) else {"family": chosen}
    return body


def instance_of(data: Mapping[str, Any]) -> Instance:
    """An instance of ``GET /instances`` as the seam's (its tags read from its name)."""
    region = (data.get("region") or {}).get("name", "")
    kind = (data.get("instance_type") or {}).get("name", "")
    state = STATES.get(str(data.get("status")), CloudState.PENDING)
    return Instance(id=str(data["id"]), region=region, instance_type=kind, state=state.value,
                    tags=tags_of(data.get("name")) or {})


def pick_ssh_key(wanted: str | None, names: Sequence[str]) -> tuple[str | None, str | None]:
    """(the SSH key to launch with, None) or (None, why there is none) (pure)."""
    shown = ", ".join(sorted(names)) or "none"
    if wanted is not None:
        if wanted in names:
            return wanted, None
        return None, (f"the SSH key {wanted!r} is not in the Lambda account (it has: {shown}); "
                      f"add it at {SSH_KEYS_URL} or name another with --lambda-ssh-key")
    if len(names) == 1:
        return names[0], None
    if not names:
        return None, (f"the Lambda account has no SSH key, and a launch needs exactly one: add "
                      f"one at {SSH_KEYS_URL}")
    return None, f"the Lambda account has several SSH keys ({shown}): name one with " \
                 "--lambda-ssh-key"


class LambdaProvider:
    """One Lambda account, in ``regions``. ``ssh_key``: the key instances are launched with
    (default: the account's only one); ``image``: an image family or id (default: Lambda's
    latest Lambda Stack image)."""

    name = "lambda"

    def __init__(self, regions: Sequence[str], *, api: LambdaApi | None = None,
                 ssh_key: str | None = None, image: str | None = None,
                 capacity_ttl_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not regions:
            raise ValueError("LambdaProvider needs at least one region (e.g. ['us-east-1'])")
        self.regions, self.image, self._wanted_key = tuple(regions), image, ssh_key
        self._api = api or LambdaApi(api_key())
        self._ttl, self._clock = capacity_ttl_s, clock
        self._types: tuple[float, Mapping[str, Any]] | None = None
        self._ssh_key: str | None = None

    def __repr__(self) -> str:
        return f"LambdaProvider({list(self.regions)!r}, {self._api!r})"

    # the seam

    def check(self) -> CloudCheck:
        """Whether the key works (``GET /instance-types``) and a launch has its SSH key."""
        if not self._api.has_key:
            return CloudCheck(self.name, False, NO_KEY)
        try:
            self._instance_types(fresh=True)
            key, why = pick_ssh_key(self._wanted_key, self._key_names())
        except CloudError as exc:
            return CloudCheck(self.name, False, _disabled(exc))
        if key is None:
            return CloudCheck(self.name, False, why)
        self._ssh_key = key
        return CloudCheck(self.name, True, None, self.regions, f"SSH key {key}")

    def launch(self, spec: LaunchSpec) -> Instance:
        where = f"{spec.region}/{spec.instance_type}"
        if spec.spot:
            raise CloudError(Failure.UNSUPPORTED, "SpotUnsupported",
                             "Lambda sells on-demand instances only", where=where)
        try:
            name = instance_name(spec.exchange_id, spec.launch_id, spec.node_id)
        except ValueError as exc:
            raise CloudError(Failure.CONFIG, "BadName", str(exc), where=where) from None
        made = self._named(name)
        if made is not None:
            return made
        self._has_capacity(spec, where)
        body = launch_request(spec, name=name, ssh_key=self._launch_key(where),
                              image=self.image)
        data = self._api.post("/instance-operations/launch", body, where=where)
        ids = data.get("instance_ids") if isinstance(data, Mapping) else None
        if not ids:
            raise CloudError(Failure.UNKNOWN, "BadResponse", "the launch answered no instance "
                             "id (the reconciler finds the instance by its name if one was "
                             "made)", where=where)
        self._types = None  # the capacity it listed has changed
        return Instance(str(ids[0]), spec.region, spec.instance_type, CloudState.PENDING.value,
                        tags=tags_of(name) or {})

    def tagged(self, exchange_id: str, regions: Sequence[str]) -> list[Instance]:
        wanted = set(regions)
        return [i for i in self._instances() if i.tags.get(TAG_EXCHANGE) == exchange_id
                and i.alive and (not wanted or i.region in wanted)]

    def terminate(self, region: str, instance_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return
        try:
            self._api.post("/instance-operations/terminate", {"instance_ids": ids},
                           where=f"{region} terminate")
        except CloudError as exc:
            if exc.code != NOT_FOUND:
                raise
            if len(ids) > 1:  # one unknown id refuses the call: the others go one by one
                for one in ids:
                    self.terminate(region, [one])

    # helpers

    def _instances(self) -> list[Instance]:
        data = self._api.get("/instances", where="GET /instances")
        return [instance_of(row) for row in data or [] if isinstance(row, Mapping)]

    def _named(self, name: str) -> Instance | None:
        """The live instance a previous try of this launch made, if any."""
        tags = tags_of(name) or {}
        for inst in self._instances():
            if inst.tags == tags and inst.alive:
                return inst
        return None

    def _instance_types(self, *, fresh: bool = False) -> Mapping[str, Any]:
        now = self._clock()
        if fresh or self._types is None or now - self._types[0] > self._ttl:
            data = self._api.get("/instance-types", where="GET /instance-types")
            self._types = (now, data if isinstance(data, Mapping) else {})
        return self._types[1]

    def _has_capacity(self, spec: LaunchSpec, where: str) -> None:
        entry = self._instance_types().get(spec.instance_type)
        if not isinstance(entry, Mapping):
            raise CloudError(Failure.UNSUPPORTED, "UnknownInstanceType",
                             f"Lambda does not offer {spec.instance_type} (GET /instance-types)",
                             where=where)
        regions = [r.get("name") for r in entry.get("regions_with_capacity_available") or []
                   if isinstance(r, Mapping)]
        if spec.region not in regions:
            shown = ", ".join(sorted(str(r) for r in regions)) or "none"
            raise CloudError(Failure.CAPACITY, INSUFFICIENT_CAPACITY,
                             f"no capacity for {spec.instance_type} in {spec.region} (regions "
                             f"with capacity now: {shown})", where=where)

    def _key_names(self) -> list[str]:
        data = self._api.get("/ssh-keys", where="GET /ssh-keys")
        return [str(k["name"]) for k in data or [] if isinstance(k, Mapping) and k.get("name")]

    def _launch_key(self, where: str) -> str:
        if self._ssh_key is None:
            key, why = pick_ssh_key(self._wanted_key, self._key_names())
            if key is None:
                raise CloudError(Failure.AUTH, "NoSshKey", why or "no SSH key", where=where)
            self._ssh_key = key
        return self._ssh_key


def _disabled(error: CloudError) -> str:
    if error.failure is Failure.AUTH:
        return f"{error.where} was refused ({error.code}): {error.message}"
    return f"{error.where}: {error.code}: {error.message}"
