"""The I/O-free calls of services (issue 20), sent by ``Client`` and ``AsyncClient`` like
those of :mod:`bourse.sdk.core`."""

from __future__ import annotations

from bourse.protocol.services import ServiceApply, ServiceDetail, ServiceList, ServiceView
from bourse.sdk.core import Call, _path_id, model


def apply_service(body: ServiceApply) -> Call[ServiceView]:
    return Call("POST", "/services", model(ServiceView), json=body.model_dump(mode="json"))


def services() -> Call[list[ServiceView]]:
    return Call("GET", "/services", lambda r: model(ServiceList)(r).services)


def service(name: str) -> Call[ServiceDetail]:
    return Call("GET", f"/services/{_path_id(name)}", model(ServiceDetail))


def rollback_service(name: str) -> Call[ServiceView]:
    return Call("POST", f"/services/{_path_id(name)}/rollback", model(ServiceView))


def stop_service(name: str) -> Call[ServiceView]:
    return Call("POST", f"/services/{_path_id(name)}/stop", model(ServiceView))
