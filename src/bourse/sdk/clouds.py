"""The I/O-free calls of launched capacity: the clouds, their launches, a project's limits."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from bourse.protocol.clouds import (
    CloudList,
    LaunchList,
    LaunchView,
    ProjectLimits,
    ProjectLimitsView,
)
from bourse.sdk.core import Call, model


def clouds() -> Call[CloudList]:
    return Call("GET", "/clouds", model(CloudList))


def launches(live: bool = False) -> Call[list[LaunchView]]:
    return Call("GET", "/launches", lambda r: model(LaunchList)(r).launches,
                params={"live": "true"} if live else {})


def limits(project: str) -> Call[ProjectLimitsView]:
    return Call("GET", f"/projects/{quote(project, safe='')}/limits", model(ProjectLimitsView))


def set_limits(project: str, **fields: Any) -> Call[ProjectLimitsView]:
    """Only the fields given change (``clouds=None`` lifts the limit, ``cap_hour=None`` the
    cap)."""
    body = ProjectLimits.model_validate(fields)
    return Call("PATCH", f"/projects/{quote(project, safe='')}/limits",
                model(ProjectLimitsView), json=body.model_dump(mode="json", exclude_unset=True))
