"""The UI's URL map. Pages, fragments (``htmx`` swaps) and the log feed (JSON) all go through
``guarded``; the login form, the redirects and the static assets are public."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from bourse.server.ui import charts, downloads, experiments, fleet, gradients, jobs, login, services
from bourse.server.ui.guard import Handler, Kind, guarded
from bourse.server.ui.render import STATIC_DIR, STATIC_PATH

Endpoint = Callable[[Request], Awaitable[Response]]
GET, POST = ("GET",), ("POST",)

GUARDED: list[tuple[str, Handler, Kind, tuple[str, ...]]] = [
    ("/ui/jobs", jobs.jobs_page, Kind.PAGE, GET),
    ("/ui/jobs/rows", jobs.jobs_rows, Kind.FRAGMENT, GET),
    ("/ui/jobs/{job_id}", jobs.job_page, Kind.PAGE, GET),
    ("/ui/jobs/{job_id}/header", jobs.job_header, Kind.FRAGMENT, GET),
    ("/ui/jobs/{job_id}/timeline", jobs.job_timeline, Kind.FRAGMENT, GET),
    ("/ui/jobs/{job_id}/logs", jobs.job_logs, Kind.JSON, GET),
    ("/ui/jobs/{job_id}/metrics", charts.job_metrics, Kind.JSON, GET),
    ("/ui/jobs/{job_id}/cancel", jobs.job_cancel, Kind.FRAGMENT, POST),
    ("/ui/jobs/{job_id}/gradients", gradients.gradients_page, Kind.PAGE, GET),
    ("/ui/nodes", fleet.nodes_page, Kind.PAGE, GET),
    ("/ui/nodes/rows", fleet.nodes_rows, Kind.FRAGMENT, GET),
    ("/ui/nodes/{node_id}", fleet.node_page, Kind.PAGE, GET),
    ("/ui/offers", fleet.offers_page, Kind.PAGE, GET),
    ("/ui/runs", fleet.runs_page, Kind.PAGE, GET),
    ("/ui/services", services.services_page, Kind.PAGE, GET),
    ("/ui/runs/list", fleet.runs_list, Kind.FRAGMENT, GET),
    ("/ui/experiments", experiments.experiments_page, Kind.PAGE, GET),
    ("/ui/experiments/{experiment_id}", experiments.runs_page, Kind.PAGE, GET),
    ("/ui/tracking/runs/{run_id}", experiments.run_page, Kind.PAGE, GET),
    ("/ui/tracking/runs/{run_id}/curves", experiments.run_curves, Kind.JSON, GET),
    ("/ui/tracking/compare", experiments.compare_page, Kind.PAGE, GET),
    ("/ui/tracking/curves", experiments.compare_curves, Kind.JSON, GET),
    ("/ui/download/{token}", downloads.download, Kind.PAGE, GET),
    ("/ui/logout", login.logout, Kind.PAGE, POST),
]
PUBLIC: list[tuple[str, Endpoint, tuple[str, ...]]] = [
    ("/", login.root, GET),
    ("/ui", login.home, GET),
    ("/ui/", login.home, GET),
    ("/ui/login", login.login_form, GET),
    ("/ui/login", login.login_submit, POST),
]


def build() -> APIRouter:
    router = APIRouter()
    for path, handler, kind, methods in GUARDED:
        router.add_route(path, guarded(handler, kind), list(methods), include_in_schema=False)
    for path, endpoint, methods in PUBLIC:
        router.add_route(path, endpoint, list(methods), include_in_schema=False)
    router.mount(STATIC_PATH, StaticFiles(directory=STATIC_DIR), name="ui-static")
    return router


router = build()
