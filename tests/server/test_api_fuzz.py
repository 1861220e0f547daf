"""Property-based fuzzing of the REST API from its own OpenAPI document (schemathesis).

Every operation in ``app.openapi()`` gets a fixed budget of generated requests, valid ones
(positive) and ones that break the schema (negative), sent in-process to the real app on SQLite
and PostgreSQL, once with the admin token and once with a member token of another project.
Checks: no 5xx; the status code, content type, headers and body are the ones the document
declares; a request that breaks the schema is refused with a 4xx.

Derandomized, so CI sees the same requests every run. ``BOURSE_FUZZ_EXAMPLES`` raises the budget
per operation and mode for a longer local run; ``BOURSE_FUZZ_ONLY`` (a regular expression over
"METHOD /path") narrows it to some operations (docs/security.md).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import CheckFunction
from schemathesis.specs.openapi import checks
from server_harness import Exchange

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXAMPLES = int(os.environ.get("BOURSE_FUZZ_EXAMPLES", "12"))
CHECKS: list[CheckFunction] = [
    checks.status_code_conformance, checks.content_type_conformance,
    checks.response_headers_conformance, checks.response_schema_conformance,
    checks.negative_data_rejection,
]
# Operations of the document that are not fuzzed, and why; each has its own tests.
UNFUZZED = {
    ("GET", "/api/v1/jobs/{job_id}/logs/follow"):
        "an SSE stream that lasts until the job ends (tests/server/test_logs_api.py, "
        "tests/sdk/test_follow.py)",
}
# What the app serves outside the OpenAPI document, by path prefix, and where it is tested.
OUTSIDE_DOCUMENT = {
    "/api/v1/agent/ws": "the agent WebSocket: tests/server/test_agent_fuzz.py fuzzes its frames",
    "/api/v1/jobs/{job_id}/exec": "WebSocket of `bourse exec` (tests/server/test_agent_channel.py)",
    "/jobs/{job_id}/ports/": "a job's own HTTP server, proxied as is "
                             "(tests/server/test_agent_channel.py)",
    "/ui": "HTML pages behind a session cookie (tests/ui)",
    "/": "redirect to the UI (tests/ui)",
    "/openapi.json": "FastAPI's document itself", "/docs": "FastAPI's docs pages",
    "/redoc": "FastAPI's docs pages",
}


class Target:
    """The exchange's loop, run by the test's own coroutine; hypothesis runs in a thread and
    hands each request to that loop."""

    def __init__(self, exchange: Exchange, token: str, known: dict[str, list[str]]) -> None:
        self.client, self.token, self.known = exchange.client, token, known
        self.loop = asyncio.get_running_loop()

    def send(self, case: schemathesis.Case) -> httpx.Response:
        kwargs = case.as_transport_kwargs(base_url="http://bourse.test")
        kwargs["headers"] = {**kwargs.get("headers", {}),
                             "Authorization": f"Bearer {self.token}"}
        kwargs.pop("timeout", None)
        coroutine = self.client.request(**kwargs)
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)


def fuzz(target: Target, operation: Any, mode: GenerationMode) -> None:
    """Run one operation's budget in one mode (called in a worker thread)."""
    path_names = [p.name for p in operation.path_parameters]
    known_ids = st.sampled_from([None, *[k for n in path_names for k in target.known.get(n, [])]])

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.generate))
    @given(case=operation.as_strategy(generation_mode=mode), known=known_ids)
    def run(case: schemathesis.Case, known: str | None) -> None:
        if known is not None and mode is GenerationMode.POSITIVE:  # an id that exists
            for name in path_names:
                if known in target.known.get(name, []):
                    case.path_parameters[name] = known
        response = target.send(case)
        assert response.status_code < 500, f"{case.method} {response.url}: {response.text}"
        case.validate_response(response, checks=CHECKS)

    run()


async def seeded(exchange: Exchange) -> dict[str, list[str]]:
    """Rows for path parameters to find: a job, a node, a secret (ids by parameter name)."""
    job = await exchange.submit()
    node_id, _ = await exchange.enroll("fuzzed")
    secret = await exchange.client.put("/api/v1/secrets/FUZZ_SECRET", json={"value": "s3cret"})
    assert secret.status_code == 201, secret.text
    return {"job_id": [job["id"]], "node_id": [node_id], "name": ["FUZZ_SECRET"],
            "run_id": [job["id"]]}


def operations(exchange: Exchange) -> list[Any]:
    schema = schemathesis.openapi.from_dict(exchange.app.openapi())
    found = [result.ok() for result in schema.get_all_operations()]
    only = re.compile(os.environ.get("BOURSE_FUZZ_ONLY", ""))
    return [op for op in found if (op.method.upper(), op.path) not in UNFUZZED
            and only.search(f"{op.method.upper()} {op.path}")]


def negatable(operation: Any) -> bool:
    """Whether the operation takes anything a request could get wrong (a parameter, a body)."""
    return any(len(inputs) for inputs in (operation.path_parameters, operation.query,
                                          operation.body))


async def run_all(exchange: Exchange, token: str,
                  modes: tuple[GenerationMode, ...]) -> None:
    target = Target(exchange, token, await seeded(exchange))
    failures: list[str] = []
    for operation in operations(exchange):
        for mode in modes if negatable(operation) else (GenerationMode.POSITIVE,):
            try:
                await asyncio.to_thread(fuzz, target, operation, mode)
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): "
                                f"{exc}")
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


async def test_admin_token(exchange: Exchange) -> None:
    await run_all(exchange, exchange.admin_token, (GenerationMode.POSITIVE,
                                                  GenerationMode.NEGATIVE))


async def test_member_of_another_project(exchange: Exchange) -> None:
    """The seeded rows belong to the default project: a member of ``other`` must get
    documented 403/404s for them, and never a 5xx."""
    token = await exchange.project_token("other")
    await run_all(exchange, token, (GenerationMode.POSITIVE,))
