"""Property-based fuzzing of the REST API from its own OpenAPI document (schemathesis).

Every operation in ``app.openapi()`` gets a fixed budget of generated requests, sent in-process
to the real app: valid ones (positive) on SQLite and PostgreSQL with the admin token and with a
member token of another project, and ones that break the schema (negative) with the admin
token on SQLite.
Checks: no 5xx; the status code, content type, headers and body are the ones the document
declares; a request that breaks the schema is refused with a 4xx.

Derandomized, so CI sees the same requests every run. ``BOURSE_FUZZ_EXAMPLES`` raises the budget
per operation and mode for a longer local run; ``BOURSE_FUZZ_ONLY`` (a regular expression over
"METHOD /path") narrows it to some operations (docs/security.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from fuzzing import Bridge, budget, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import CheckFunction
from schemathesis.specs.openapi import checks
from server_harness import Exchange
from starlette.routing import BaseRoute

pytestmark = pytest.mark.anyio

EXAMPLES = budget(10)
CHECKS: list[CheckFunction] = [
    checks.status_code_conformance, checks.content_type_conformance,
    checks.response_headers_conformance, checks.response_schema_conformance,
    checks.negative_data_rejection,
]
LONG = 4096  # characters; see for_generation
# The operations are fuzzed in shards, each a test of its own, so that the suite's workers
# share the work (one test for all of them took over a minute on 2 cores).
SHARDS = 4
# Operations of the document that are not fuzzed, and why; each has its own tests.
UNFUZZED = {
    ("GET", "/api/v1/jobs/{job_id}/logs/follow"):
        "an SSE stream that lasts until the job ends (tests/server/test_logs_api.py, "
        "tests/sdk/test_follow.py)",
}
# What the app serves outside the OpenAPI document (path patterns), and where it is tested.
OUTSIDE_DOCUMENT = {
    r"^/api/v1/agent/ws$": "the agent WebSocket: its frames are fuzzed in test_agent_fuzz.py",
    r"^/api/v1/jobs/\{job_id\}/exec$": "the WebSocket of `bourse exec` "
                                      "(tests/tunnel/test_ports_exec.py)",
    r"^/jobs/\{job_id\}/ports/": "a job's own server, proxied as it is "
                                 "(tests/tunnel/test_ports_exec.py)",
    r"^/ui(/|$)|^/$": "HTML pages behind a session cookie (tests/ui)",
    r"^/(openapi\.json|docs|docs/oauth2-redirect|redoc)$": "FastAPI's document and its viewers",
    r"\{\w+:path\}": "a path parameter that takes slashes: the document names it `{name}`, "
                      "and that operation is fuzzed",
    r"^/svc/": "a service's own API behind the gateway, proxied as it is (tests/serving)",
}


class Target:
    """Sends generated requests, from hypothesis's thread, on the exchange's loop."""

    def __init__(self, exchange: Exchange, token: str, known: dict[str, list[str]]) -> None:
        self.client, self.token, self.known = exchange.client, token, known
        self.bridge = Bridge()

    def send(self, case: schemathesis.Case) -> httpx.Response:
        kwargs = case.as_transport_kwargs(base_url="http://bourse.test")
        kwargs["headers"] = {**kwargs.get("headers", {}),
                             "Authorization": f"Bearer {self.token}"}
        kwargs.pop("timeout", None)
        if not kwargs.get("cookies"):  # none are generated: httpx warns about per-request ones
            kwargs.pop("cookies", None)
        return self.bridge.run(self.client.request(**kwargs))

    def fuzz(self, operation: Any, mode: GenerationMode) -> None:
        """One operation's budget in one mode (blocking: run it in a thread). Valid requests
        name a seeded row (an id that exists) half the time."""
        names = [p.name for p in operation.path_parameters]
        known = st.sampled_from([None, *[(n, k) for n in names for k in self.known.get(n, [])]])

        @fuzz_settings(EXAMPLES)
        @given(case=operation.as_strategy(generation_mode=mode), row=known)
        def run(case: schemathesis.Case, row: tuple[str, str] | None) -> None:
            if row is not None and mode is GenerationMode.POSITIVE:
                case.path_parameters[row[0]] = row[1]
            response = self.send(case)
            assert response.status_code < 500, f"{case.method} {response.url}: {response.text}"
            case.validate_response(response, checks=CHECKS)

        run()


async def seeded(exchange: Exchange) -> dict[str, list[str]]:
    """Rows of the default project for path parameters to find, by parameter name: a job of
    a run, a node, a secret, a bundle, and a token that may be revoked."""
    job = await exchange.submit(run="r-fuzzed")
    node_id, _ = await exchange.enroll("fuzzed")
    secret = await exchange.client.put("/api/v1/secrets/FUZZ_SECRET", json={"value": "s3cret"})
    bundle = b"a code bundle"
    sha = hashlib.sha256(bundle).hexdigest()
    uploaded = await exchange.client.put(f"/api/v1/bundles/{sha}", content=bundle)
    token = await exchange.client.post("/api/v1/tokens", json={"project": "default",
                                                               "role": "member"})
    for response in (secret, uploaded, token):
        assert response.status_code == 201, response.text
    return {"job_id": [job["id"]], "node_id": [node_id], "name": ["FUZZ_SECRET"],
            "run_id": ["r-fuzzed"], "sha256": [sha], "token_id": [token.json()["id"]]}


def operations(exchange: Exchange, shard: int | None = None) -> list[Any]:
    """The fuzzed operations, in document order; ``shard``: every SHARDS-th of them."""
    schema = schemathesis.openapi.from_dict(for_generation(unsecured(exchange.app.openapi())))
    found = [result.ok() for result in schema.get_all_operations()]
    only = re.compile(os.environ.get("BOURSE_FUZZ_ONLY", ""))
    chosen = [op for op in found if (op.method.upper(), op.path) not in UNFUZZED
              and only.search(f"{op.method.upper()} {op.path}")]
    return chosen if shard is None else chosen[shard::SHARDS]


def unsecured(document: dict[str, Any]) -> dict[str, Any]:
    """The document without its bearer scheme: every request here carries a token (``Target``
    adds it), so a request without one is no schema-breaking example of this test's; refusing
    those is what test_tenancy.py and test_openapi.py check."""
    paths = {path: {method: {k: v for k, v in op.items() if k != "security"}
                    for method, op in ops.items()}
             for path, ops in document["paths"].items()}
    components = {k: v for k, v in document.get("components", {}).items()
                  if k != "securitySchemes"}
    return {**document, "paths": paths, "components": components}


def for_generation(value: Any) -> Any:
    """The document, but for the ``maxLength`` of a string that also has a ``pattern`` when it
    is above LONG: schemathesis folds the bound into the pattern (``^[^\\x00]{0,65536}$``),
    which jsonschema-rs takes about a second per 64 Ki to compile, again for every
    schema-breaking example of a job spec (command items, env values). Those limits are
    tested in test_api_validation.py; a longer string generated here is refused with a
    documented 422."""
    if isinstance(value, list):
        return [for_generation(v) for v in value]
    if not isinstance(value, dict):
        return value
    loose = "pattern" in value and value.get("maxLength", 0) > LONG
    return {k: for_generation(v) for k, v in value.items() if not (loose and k == "maxLength")}


def negatable(operation: Any) -> bool:
    """Whether the operation takes anything a request could get wrong (a parameter, a body)."""
    return any(len(inputs) for inputs in (operation.path_parameters, operation.query,
                                          operation.body))


async def run_all(exchange: Exchange, token: str, modes: tuple[GenerationMode, ...],
                  shard: int) -> None:
    target = Target(exchange, token, await seeded(exchange))
    failures: list[str] = []
    for operation in operations(exchange, shard):
        for mode in modes if negatable(operation) else (GenerationMode.POSITIVE,):
            try:
                await asyncio.to_thread(target.fuzz, operation, mode)
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): "
                                f"{exc}")
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
async def test_admin_token(exchange: Exchange, backend: str, shard: int) -> None:
    """Requests that break the schema are refused by validation before any database work, so
    they are sent on SQLite only (schemathesis takes seconds to build each one from the job
    spec's schema); valid ones on both databases."""
    negative = (GenerationMode.NEGATIVE,) if backend == "sqlite" else ()
    await run_all(exchange, exchange.admin_token, (GenerationMode.POSITIVE, *negative), shard)


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("shard", range(SHARDS))
async def test_member_of_another_project(exchange: Exchange, shard: int) -> None:
    """The seeded rows belong to the default project: a member of ``other`` must get
    documented 403/404s for them, and never a 5xx. On SQLite only: which project may see a
    row is decided by the same queries on both databases, and the admin's valid requests
    already run every operation on PostgreSQL."""
    token = await exchange.project_token("other")
    await run_all(exchange, token, (GenerationMode.POSITIVE,), shard)


async def test_every_route_is_fuzzed_or_listed(exchange: Exchange) -> None:
    """Nothing escapes the fuzzer silently: a route outside the document, or an operation
    left out, is listed with its reason; and no entry of those lists is stale."""
    document = exchange.app.openapi()["paths"]
    listed = {(m.upper(), p) for p, item in document.items() for m in item}
    assert set(UNFUZZED) <= listed
    outside = {p for p in served_paths(exchange.app.routes) if p not in document}
    unexplained = {p for p in outside if not any(re.search(r, p) for r in OUTSIDE_DOCUMENT)}
    assert not unexplained, f"add them to OUTSIDE_DOCUMENT with a reason: {unexplained}"
    assert all(any(re.search(r, p) for p in outside) for r in OUTSIDE_DOCUMENT)


async def test_shards_cover_every_operation(exchange: Exchange) -> None:
    """Each fuzzed operation is in exactly one shard."""
    every = [(op.method, op.path) for op in operations(exchange)]
    sharded = [(op.method, op.path) for n in range(SHARDS) for op in operations(exchange, n)]
    assert sorted(sharded) == sorted(every) and len(set(every)) == len(every)


def served_paths(routes: Iterable[BaseRoute]) -> Iterator[str]:
    """The path of every route and mount, HTTP or WebSocket, included routers flattened."""
    for route in routes:
        nested = getattr(getattr(route, "original_router", None), "routes", None)
        if nested is not None:
            yield from served_paths(nested)
        else:
            yield str(getattr(route, "path", ""))
