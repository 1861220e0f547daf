"""What answers without a token is what docs/security.md lists ("Routes without a token"), and
the enrolment example of docs/exchange.md works as written."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from route_requests import request_for
from server_harness import Exchange
from starlette.routing import BaseRoute, Mount, Route

pytestmark = pytest.mark.anyio

DOCS = Path(__file__).resolve().parents[2] / "docs"
# a value for each path parameter the app's routes take, well-formed so that a route is
# refused for its missing token, not for its path
PARAMS = {"job_id": "j-0123456789ab", "node_id": "n-0123456789ab", "run_id": "r-0123456789ab",
          "token_id": "tok-0123456789ab", "name": "SOME_NAME", "sha256": "a" * 64,
          "port": "8000", "path": "x", "project": "default", "id": "1", "grant_id": "u" + "0" * 20,
          "token": "not-a-signed-link", "tracking_run": "x-run", "experiment": "0",
          "key": "loss"}
STATIC = "/ui/static/ui.css"  # a file of the UI's static mount


def _walk(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    for route in routes:
        nested = getattr(getattr(route, "original_router", None), "routes", None)
        if nested is not None:  # FastAPI >= 0.16x keeps included routers as one route each
            yield from _walk(nested)
        else:
            yield route


def requests(exchange: Exchange) -> list[tuple[str, dict[str, Any]]]:
    """(``METHOD /route``, a well-formed request without a token) for every HTTP route of the
    app; the static mount's once."""
    found = []
    for route in _walk(exchange.app.routes):
        if isinstance(route, Mount):
            found.append((f"GET {route.path}/…", {"method": "GET", "url": STATIC}))
        elif isinstance(route, APIRoute | Route):
            for method in sorted(set(route.methods or ()) - {"HEAD"}):
                found.append((f"{method} {route.path}", _request(route, method)))
    assert len(found) > 40  # every route, not a vacuous loop
    return found


def _request(route: Route, method: str) -> dict[str, Any]:
    if isinstance(route, APIRoute):  # with the body and query the API route wants
        return request_for(method, route.path, PARAMS)
    url = re.sub(r"{(\w+)(?::\w+)?}", lambda m: PARAMS[m.group(1)], route.path)
    return {"method": method, "url": url}


def documented() -> set[str]:
    """``METHOD /path`` of each route in the table of docs/security.md's section."""
    text = (DOCS / "security.md").read_text()
    section = text.split("### Routes without a token", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {found for row in rows for found in re.findall(r"`([A-Z]+ /[^`]*)`", row)}


async def test_only_the_documented_routes_answer_without_a_token(exchange: Exchange) -> None:
    public = set()
    for route, request in requests(exchange):
        response = await exchange.client.request(**request, headers={"Authorization": ""})
        to_login = response.headers.get("location", "").startswith("/ui/login?")
        if response.status_code < 400 and not to_login:
            public.add(route)
        else:
            assert response.status_code in (303, 401), (route, response.text)
    assert public == documented()


async def test_the_schema_shows_no_data_of_the_exchange(exchange: Exchange) -> None:
    job = await exchange.submit(name="a-secret-looking-name")
    schema = (await exchange.client.get("/openapi.json", headers={"Authorization": ""})).text
    assert job["id"] not in schema and "a-secret-looking-name" not in schema


def enrolment_example() -> list[str]:
    """The ``curl`` that makes an enrolment token in docs/exchange.md, as words."""
    text = (DOCS / "exchange.md").read_text()
    start = text.index("curl -X POST $BOURSE_URL/api/v1/enrollments")
    lines = []
    for line in text[start:].splitlines():
        lines.append(line.split("   # ")[0].rstrip(" \\"))
        if not line.rstrip().endswith("\\"):
            break
    return shlex.split(" ".join(lines))


async def test_the_enrolment_example_of_the_docs_works(exchange: Exchange) -> None:
    words = enrolment_example()
    assert words[:3] == ["curl", "-X", "POST"]
    headers = dict(h.split(": ", 1) for flag, h in pairwise(words) if flag == "-H")
    body = words[words.index("-d") + 1]
    assert headers.pop("Authorization") == "Bearer $BOURSE_TOKEN"
    url = words[3].replace("$BOURSE_URL", "")
    # curl sends -d data as a form unless told otherwise, as httpx does for ``data``
    response = await exchange.client.post(url, content=body.encode(), headers={
        "Content-Type": "application/x-www-form-urlencoded", **headers})
    assert response.status_code == 201, response.text
    assert response.json()["token"].startswith("bse_e_")
