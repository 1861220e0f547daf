"""What the OpenAPI document says beyond the routes: stable operation ids, how to authorise,
how lists page.

An operation id is the route's tag and its function's name without the tag's noun
(``list_jobs`` under ``jobs`` is ``jobs_list``, ``set_node_tags`` under ``nodes`` is
``nodes_set_tags``) and ``show`` read as ``get``: short, snake_case, and unchanged as long as
the function keeps its name, so generated clients keep their method names across releases
(FastAPI's default adds the path and the method, and changes with either).
"""

from __future__ import annotations

from fastapi.routing import APIRoute

VERBS = {"show": "get"}
# the ``after`` parameter of the lists that page by cursor
AFTER_CURSOR = ("A cursor: 0 for the first page, then the `cursor` the previous page "
                "returned.")
AFTER_EVENT = "A cursor: 0 for the first page, then the `id` of the last event returned."
AFTER_FOLLOW = ("Resume after this log cursor (the `cursor` of the last chunk received); 0 "
                "for the whole log.")

DESCRIPTION = """An open, self-hostable exchange for GPU compute.

**Authorise** with an API token as a bearer token (`Authorization: Bearer bse_...`): the
*Authorize* button above takes one. `bourse tokens create` makes a token (admin); `bourse
login` stores one for the CLI and SDK. Agents use their node token the same way.

**Pages.** Lists that grow without end page by cursor: job logs
(`GET /api/v1/jobs/{job_id}/logs`), a job's timeline (`GET /api/v1/jobs/{job_id}/events`) and
the audit trail (`GET /api/v1/audit`). Ask with `after=0` first, then pass the `cursor` of each
page (for events, the last event's `id`) as `after` for the next; a page of logs says `done`
once the job has ended and nothing is left. Other lists take a `limit` and return the newest.
"""


def operation_id(route: APIRoute) -> str:
    """``{tag}_{verb}``: the function's name without the tag's noun; ``show`` is ``get``."""
    tag = str(route.tags[0]) if route.tags else "bourse"
    nouns = {tag, tag.removesuffix("s")}
    words = [VERBS.get(w, w) for w in route.name.split("_") if w not in nouns]
    return "_".join([tag, *words]) if words else tag
