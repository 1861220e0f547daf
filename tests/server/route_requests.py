"""A well-formed request for every route of the API, so that tests over all routes (auth,
tenancy, audit) fail only for what they test. A route added later with a path parameter or a
body this module does not know makes those tests fail, until it is taught here."""

from __future__ import annotations

import hashlib
import string
from typing import Any

from server_harness import Exchange, api_routes, job_spec

BUNDLE = b"bundle bytes"
SHA = hashlib.sha256(BUNDLE).hexdigest()
PUBLIC = {"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/v1/jobs"): {"json": job_spec()},
    ("POST", "/api/v1/jobs/batch"): {"json": {"jobs": [job_spec()]}},
    ("POST", "/api/v1/agent/enroll"): {"json": {"name": "n1"}},
    ("POST", "/api/v1/projects"): {"json": {"name": "made-by-matrix"}},
    ("PUT", "/api/v1/secrets/{name}"): {"json": {"value": "matrix-value"}},
    ("PUT", "/api/v1/nodes/{node_id}/tags"): {"json": {"tags": ["hipaa"]}},
    ("POST", "/api/v1/data/credentials"): {"json": {"read": ["s3://bourse/shared/"]}},
    ("POST", "/api/v1/services"): {"json": {"name": "matrix-svc", "job": job_spec(),
                                            "policy": {"port": 18000}}},
    ("POST", "/api/v1/jobs/{job_id}/burst"): {"json": {"compute": {"cpus": 1}}},
}

# The tracking routes' parameters, for tests that need some value rather than a real run
TRACKING_IDS = {"tracking_run": "x-run", "experiment": "0", "path": "0/x-run/artifacts/a.txt",
                "service": "matrix-svc",
                "key": "loss"}

# Routes that name what they read in their query: (method, path) -> (parameter, its id, default)
QUERIES: dict[tuple[str, str], tuple[str, str, str]] = {
    ("GET", "/api/v1/data/summary"): ("uri", "uri", "s3://bourse/shared/"),
    ("GET", "/api/2.0/mlflow/runs/get"): ("run_id", "tracking_run", "x-run"),
    ("GET", "/api/2.0/mlflow/experiments/get"): ("experiment_id", "experiment", "x-exp"),
    ("GET", "/api/2.0/mlflow-artifacts/artifacts"): ("path", "path", "0/x-run/artifacts"),
}


def routes(exchange: Exchange) -> list[tuple[str, str]]:
    """(method, path) of every authenticated route."""
    found = [(method, path) for method, path in api_routes(exchange.app) if path not in PUBLIC]
    assert len(found) >= 15  # every route of the API, not a vacuous loop
    return found


def path_params(path: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(path) if name]


def request_for(method: str, path: str, ids: dict[str, str],
                bundle: bytes = BUNDLE) -> dict[str, Any]:
    """The request for a route with ``ids`` in its path parameters."""
    missing = [p for p in path_params(path) if p not in ids]
    assert not missing, f"{method} {path}: no value for path parameter(s) {missing}; " \
                        "teach tests/server/route_requests.py (and the tenancy matrix) about it"
    body: dict[str, Any] = BODIES.get((method, path), {})
    if not body and method == "PUT" and "{sha256}" in path:
        body = {"content": bundle}
    elif not body and method in ("POST", "PUT", "PATCH"):
        body = {"json": {}}
    query = QUERIES.get((method, path))
    if query is not None:
        name, key, default = query
        body = {**body, "params": {name: ids.get(key, default)}}
    url = path.replace(":path}", "}").format(**ids)  # a {name:path} parameter takes slashes
    return {"method": method, "url": url, **body}
