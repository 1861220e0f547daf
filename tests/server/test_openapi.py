"""The OpenAPI document: stable, unique, snake_case operation ids (a snapshot, so a rename is
a decision and not an accident), a bearer scheme on every route that needs a token, and the
cursor pages documented."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute

from bourse.server.app import create_app
from bourse.server.config import ServerConfig
from bourse.server.openapi import operation_id

SNAPSHOT = Path(__file__).with_name("operation_ids.txt")
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
OPEN = {"agent_enroll", "health_liveness"}  # the enrolment token rides in the body; liveness


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    app = create_app(ServerConfig(data_dir=tmp_path_factory.mktemp("openapi")),
                     run_scheduler=False)
    document: dict[str, Any] = app.openapi()
    return document


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, op) for path, ops in spec["paths"].items()
            for method, op in ops.items()]


def test_operation_ids_are_unique_snake_case(spec: dict[str, Any]) -> None:
    ids = [op["operationId"] for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert [i for i in ids if not SNAKE.fullmatch(i)] == []


def test_operation_ids_match_the_snapshot(spec: dict[str, Any]) -> None:
    found = sorted(f"{op['operationId']} {method} {path}"
                   for method, path, op in operations(spec))
    # a new route adds a line, a renamed function changes one: update the file on purpose
    assert found == SNAPSHOT.read_text().splitlines()


@pytest.mark.parametrize(("name", "tags", "expected"), [
    ("list_jobs", ["jobs"], "jobs_list"), ("show", ["jobs"], "jobs_get"),
    ("set_node_tags", ["nodes"], "nodes_set_tags"), ("cost", ["cost"], "cost"),
    ("list_tokens", ["access"], "access_list_tokens"), ("x", [], "bourse_x"),
])
def test_an_operation_id_is_the_tag_and_the_verb(name: str, tags: list[str],
                                                 expected: str) -> None:
    async def endpoint() -> None:
        return None

    endpoint.__name__ = name
    assert operation_id(APIRoute("/x", endpoint, tags=list(tags))) == expected


def test_routes_that_need_a_token_say_so(spec: dict[str, Any]) -> None:
    schemes = spec["components"]["securitySchemes"]
    assert schemes == {"token": {"type": "http", "scheme": "bearer",
                                 "bearerFormat": "bourse token",
                                 "description": schemes["token"]["description"]}}
    for _, _, op in operations(spec):
        expected = None if op["operationId"] in OPEN else [{"token": []}]
        assert op.get("security") == expected, op["operationId"]


def test_cursor_pages_are_documented(spec: dict[str, Any]) -> None:
    paged = {"jobs_logs", "jobs_events", "audit_list_records", "jobs_follow"}
    for _, _, op in operations(spec):
        if op["operationId"] in paged:
            [after] = [p for p in op["parameters"] if p["name"] == "after"]
            assert "cursor" in after["description"], op["operationId"]
    assert "Pages." in spec["info"]["description"]
    page = spec["components"]["schemas"]["LogPage"]["properties"]
    assert "`after`" in page["cursor"]["description"]
