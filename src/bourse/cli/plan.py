"""``bourse run --dry-run``: the job a command or task file would be, and where it would run.

Nothing is submitted or uploaded. The plan says the job spec in short, the code that would be
packed (packed into a temporary file, to count it and hold it to the bundle limit), and the
offer it would take now: the exchange's matcher over its live nodes (``POST /offers``, what
``bourse offers --exchange`` shows), cheapest first as placement takes them, with why each
other offer was left out. When no node fits, the clouds the exchange launches on are asked
for the cheapest launchable fit of their catalogue. Without an exchange (none configured, or
unreachable), the shipped catalogues say what the market sells for it. Exit 1 when nothing
fits anywhere, as ``bourse offers``. The secrets the job names are checked against the
project's first, as the exchange checks them at submit (exit 2).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from bourse.cli import client as seam
from bourse.cli.errors import EXIT_NO_RESULT
from bourse.cli.render import echo_json
from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.core.match import Match
from bourse.protocol.api import OfferView
from bourse.protocol.clouds import CloudList
from bourse.protocol.common import JobSpec
from bourse.sdk.bundle import human_size, pack
from bourse.sdk.client import Client
from bourse.sdk.errors import Forbidden, NotConfigured, Unreachable

SHOWN = 3  # offers listed beside the one it would take


@dataclass
class Where:
    """Where the job would run: ``source`` (exchange, launch, catalogue) and its offers."""

    source: str
    offers: list[dict[str, Any]] = field(default_factory=list)
    explanation: list[str] = field(default_factory=list)
    note: str | None = None


def show_plan(spec: JobSpec, code: Path | None, summary: str, *, as_json: bool) -> None:
    facts = code_facts(code)
    where = with_gpu_note(spec.compute, where_it_runs(spec.compute, spec.project_secrets))
    if as_json:
        echo_json({"submitted": False, "spec": spec, "summary": summary, "code": facts,
                   "source": where.source, "would_take": where.offers[0] if where.offers
                   else None, "offers": where.offers, "explanation": where.explanation,
                   "note": where.note})
    else:
        click.echo("\n".join([*spec_lines(spec, summary, facts), *where_lines(spec, where)]))
    if not where.offers:
        sys.exit(EXIT_NO_RESULT)


def code_facts(code: Path | None) -> dict[str, Any] | None:
    if code is None:
        return None
    with tempfile.TemporaryDirectory(prefix="bourse-") as tmp:
        bundle = pack(code, out=Path(tmp) / "code.tar.gz")
    return {"root": str(code), "files": bundle.file_count, "bytes": bundle.size,
            "sha256": bundle.sha256, "warnings": list(bundle.warnings)}


def spec_lines(spec: JobSpec, summary: str, code: dict[str, Any] | None) -> list[str]:
    """The job in short; env values are left out (the names say enough, values may be
    private)."""
    facts: dict[str, str | None] = {
        "name": spec.name, "runs": summary, "compute": spec.compute.describe(),
        "env": ", ".join(spec.env) or None,
        "secrets": ", ".join(spec.project_secrets) or None,
        "inputs": ", ".join(f"{n}={u}" for n, u in spec.inputs.items()) or None,
        "outputs": ", ".join(f"{n}={u}" for n, u in spec.outputs.items()) or None,
        "checkpoint": spec.checkpoint,
        "ports": ", ".join(f"{p.number}" + (":keep" if p.path == "keep" else "")
                           for p in spec.ports) or None,
        "retries": str(spec.max_retries),
        "pending": f"fails after {spec.pending_timeout_s:g} s waiting"
        if spec.pending_timeout_s else None,
        "code": _code_line(code),
    }
    lines = ["dry run: nothing submitted"]
    lines += [f"  {k:<11} {v}" for k, v in facts.items() if v is not None]
    return lines


def _code_line(code: dict[str, Any] | None) -> str:
    if code is None:
        return "none (--no-code)"
    text = f"{code['root']}: {code['files']} files, {human_size(code['bytes'])} (not uploaded)"
    return "; ".join([text, *code["warnings"]])


def where_lines(spec: JobSpec, where: Where) -> list[str]:
    nodes = spec.compute.num_nodes
    lines = [f"note: {where.note}"] if where.note else []
    if where.offers:
        best = where.offers[0]
        verb = {"exchange": "would take", "launch": "would launch",
                "catalogue": "the market sells"}[where.source]
        each = f" (each of {nodes} nodes; a gang's must share a network)" if nodes > 1 else ""
        lines.append(f"{verb}: {offer_text(best)}{each}")
        lines.append(f"  why: {why(where, len(where.offers))}")
        lines += [f"  then: {offer_text(o)}" for o in where.offers[1:SHOWN]]
    else:
        lines.append(f"nothing fits {spec.compute.describe()}:")
    lines += [f"  {line}" for line in where.explanation]
    return lines


def offer_text(offer: dict[str, Any]) -> str:
    gpu = f"{offer['gpu_count']} x {offer['gpu']}" if offer.get("gpu") else "no GPU"
    spot = " (spot)" if offer.get("spot") else ""
    node, name = offer.get("node"), offer["instance_type"]  # a node's offer: its name
    where = f"{name} ({node})" if node and node != name else name
    return (f"{offer['id']} - {offer['provider']} {where}, {gpu}, {offer['region']}, "
            f"${offer['price_per_hour']:.4f}/h{spot}")


def why(where: Where, count: int) -> str:
    fits = f"{count} offer{'s' if count != 1 else ''} fit{'s' if count == 1 else ''}"
    return {"exchange": f"the cheapest live node that fits ({fits} now; placement takes "
                        "the cheapest first)",
            "launch": "no live node fits; the cheapest launchable machine of the clouds the "
                      f"exchange launches on ({fits})",
            "catalogue": f"the cheapest in the shipped cloud catalogues ({fits})"}[where.source]


GPU_ONLY = ("the job asks for no GPU, but the cloud catalogues list GPU machines only: this "
            "is the cheapest of those; an exchange's own nodes, CPU-only ones included, can "
            "take it instead")


def with_gpu_note(compute: Compute, where: Where) -> Where:
    """Where, saying so when a job without a GPU would get a catalogue's GPU machine (every
    shipped catalogue offer has a GPU, so a CPU-only job is priced as one)."""
    best = where.offers[0] if where.offers else None
    if compute.gpu is not None or best is None or where.source == "exchange" or \
            not best.get("gpu"):
        return where
    note = f"{where.note}; {GPU_ONLY}" if where.note else GPU_ONLY
    return Where(where.source, where.offers, where.explanation, note)


def check_secrets(client: Client, names: Sequence[str]) -> None:
    """Refuse, as the exchange refuses at submit, a job naming a secret its project lacks;
    nothing is said when the token may not list them (the exchange says it then)."""
    if not names:
        return
    try:
        have = {s.name for s in client.secrets()}
    except Forbidden:
        return
    missing = [n for n in names if n not in have]
    if missing:
        raise InvalidInput(f"no secret {missing[0]!r} in this project",
                           field="project_secrets",
                           hint=f"set it first with `bourse secrets set {missing[0]}`")


def where_it_runs(compute: Compute, secrets: Sequence[str] = ()) -> Where:
    """The exchange's answer, else a launch it could make, else the catalogues' (the job's
    secrets checked first, where there is an exchange to ask)."""
    try:
        with seam.open_client() as client:
            check_secrets(client, secrets)
            found = client.offers(compute, limit=SHOWN, explain=True)
            if found.offers:
                return Where("exchange", [exchange_offer(o) for o in found.offers],
                             list(found.explanation or []))
            clouds = client.clouds()
    except (NotConfigured, Unreachable) as exc:
        return _catalogue(compute, f"no exchange to ask ({exc.message}): the public "
                                   "catalogues' offers instead")
    launchable = launch_offers(compute, clouds)
    return Where("launch" if launchable else "exchange", launchable,
                 list(found.explanation or []), clouds.note)


def exchange_offer(o: OfferView) -> dict[str, Any]:
    return {**o.model_dump(mode="json"), "node": o.node_id}


def launch_offers(compute: Compute, clouds: CloudList) -> list[dict[str, Any]]:
    """The cheapest catalogue offers of the clouds the exchange launches on, in their
    regions."""
    enabled = {c.name: set(c.regions) for c in clouds.clouds if c.enabled}
    if not enabled:
        return []
    matches = [m for m in _matches(compute, limit=200)
               if m.offer.provider in enabled
               and (not enabled[m.offer.provider] or m.offer.region in enabled[m.offer.provider])]
    return [catalogue_offer(m) for m in matches[:SHOWN]]


def _catalogue(compute: Compute, note: str) -> Where:
    matches = _matches(compute, SHOWN)
    explanation: list[str] = []
    if not matches:
        from bourse.core.match import explain
        from bourse.market.catalogs import catalog_offers

        explanation = explain(compute, catalog_offers()).lines()
    return Where("catalogue", [catalogue_offer(m) for m in matches], explanation, note)


def _matches(compute: Compute, limit: int) -> list[Match]:
    from bourse.market.catalogs import catalog_offers
    from bourse.market.index import OfferIndex

    return OfferIndex(catalog_offers()).match(compute, limit)


def catalogue_offer(m: Match) -> dict[str, Any]:
    o = m.offer
    return {"id": o.id, "provider": o.provider, "instance_type": o.instance_type,
            "node": None, "region": o.region, "zone": o.zone, "gpu": o.gpu,
            "gpu_count": o.gpu_count, "cpus": o.cpus, "memory_gib": o.memory_gib,
            "price_per_hour": m.price, "spot": m.spot}


