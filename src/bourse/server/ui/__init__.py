"""The web UI, served by the coordinator at ``/ui/`` behind the API's tokens (see docs/ui.md).

Server-rendered Jinja2 templates with htmx for the parts that refresh, a small script for the
live log viewer, and vendored static assets; no build step. The UI's routes are plain Starlette
routes, not API operations: they are not in the OpenAPI document, and their auth is the session
cookie (``session.py``), never a bearer header.
"""

from __future__ import annotations

from bourse.server.ui.routes import router

__all__ = ["router"]
