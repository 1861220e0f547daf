"""The services page: each service's versions, and a chart per figure (error rate, p99) of
both versions over time with the decisions marked — an SVG drawn here, from the service's
figures rows (``serving.keeper``), with numbers and version numbers only in it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.responses import Response

from bourse.protocol.services import ServiceDetail, ServiceEventView
from bourse.server.services import serving as svc
from bourse.server.serving.views import service_detail
from bourse.server.ui.guard import Ctx
from bourse.server.ui.render import page

WIDTH, HEIGHT, PAD = 640, 160, 30
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def chart(series: Sequence[dict[str, Any]], decisions: Sequence[ServiceEventView],
          key: str, unit: str) -> str:
    """One line per version of ``key`` over time; a dashed line at each decision."""
    points = [(float(row["time"]), int(v), float(f[key])) for row in series
              for v, f in row.items() if v != "time" and isinstance(f, dict)
              and f.get(key) is not None]
    if not points:
        return '<p class="hint">no traffic yet</p>'
    t0 = min(p[0] for p in points)
    t1 = max([p[0] for p in points] + [d.time for d in decisions]) or t0 + 1
    top = max(p[2] for p in points) or 1.0

    def x(t: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * (t - t0) / max(t1 - t0, 1e-9)

    def y(value: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="{key} by version">',
             f'<text x="{PAD}" y="14" font-size="11">{key} (max {top:.3g} {unit})</text>']
    for i, version in enumerate(sorted({p[1] for p in points})):
        line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, n, v in points if n == version)
        colour = COLOURS[i % len(COLOURS)]
        parts.append(f'<polyline fill="none" stroke="{colour}" points="{line}"/>')
        parts.append(f'<text x="{WIDTH - PAD + 2}" y="{20 + 12 * i}" font-size="10" '
                     f'fill="{colour}">v{version:d}</text>')
    for d in decisions:
        parts.append(f'<line x1="{x(d.time):.1f}" x2="{x(d.time):.1f}" y1="{PAD}" '
                     f'y2="{HEIGHT - PAD}" stroke="#555" stroke-dasharray="3,3"/>')
    parts.append("</svg>")
    return "".join(parts)  # numbers and fixed text only: the template marks it safe


def charts_of(detail: ServiceDetail) -> dict[str, str]:
    decisions = [e for e in detail.events if e.kind == "decision"]
    return {"errors": chart(detail.series, decisions, "error_rate", ""),
            "p99": chart(detail.series, decisions, "p99_ms", "ms")}


async def services_page(ctx: Ctx) -> Response:
    now = ctx.state.clock()
    async with ctx.state.db.read() as session:
        rows = await svc.list_services(session, ctx.scope)
        details = [await service_detail(session, r, ctx.state.gateway, now) for r in rows]
    shown = [(d, charts_of(d), [e for e in d.events if e.kind == "decision"][-5:])
             for d in details]
    return page("services.html", **ctx.context(services=shown))
