"""Templates, static assets and the headers every UI response carries."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse, JSONResponse, Response

from bourse.server.ui.run_rows import PAGE_ROWS, run_rows
from bourse.server.ui.views import percent

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
STATIC_PATH = "/ui/static"
VENDOR = {"htmx": "vendor/htmx-2.0.11.min.js", "uplot_js": "vendor/uPlot-1.6.32.iife.min.js",
          "uplot_css": "vendor/uPlot-1.6.32.min.css"}

# Scripts and styles from this origin only: no inline script, no eval, no CDN. ``frame-src``
# will need ``'self'`` when the job page embeds proxied ports.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
HTMX_CONFIG = json.dumps({"includeIndicatorStyles": False, "allowEval": False,
                          "allowScriptTags": False, "historyCacheSize": 0,
                          "selfRequestsOnly": True})


@cache
def static_url(name: str) -> str:
    """The asset's URL with a digest of its content, so a new release is never served stale."""
    path = (STATIC_DIR / name).resolve()
    if STATIC_DIR.resolve() not in path.parents:
        raise ValueError(f"not a static asset: {name}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return f"{STATIC_PATH}/{name}?v={digest}"


def when(timestamp: float | None) -> str:
    """A UTC time stamp, to the second (the page turns it into local time when it can)."""
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(timestamp: float | None) -> str:
    return "" if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()


def money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


@cache
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(static=static_url, vendor=VENDOR, htmx_config=HTMX_CONFIG,
                       page_rows=PAGE_ROWS)
    env.filters.update(when=when, iso=iso, money=money, percent=percent, run_rows=run_rows)
    return env


def page(template: str, status: int = 200, headers: dict[str, str] | None = None,
         **context: Any) -> HTMLResponse:
    """A rendered template (a page or a fragment) with the UI's security headers."""
    body = environment().get_template(template).render(**context)
    return HTMLResponse(body, status, headers={**SECURITY_HEADERS, **(headers or {})})


def json_response(content: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(content, status, headers=SECURITY_HEADERS)


def secured(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
