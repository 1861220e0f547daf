"""``bourse offers``: what the market can sell for a requirement, cheapest first."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from bourse.cli.errors import EXIT_NO_RESULT, handles_errors
from bourse.cli.render import echo_json, money, table
from bourse.core.compute import SPOT_POLICIES, Compute
from bourse.core.errors import InvalidInput
from bourse.core.match import Explanation, Match, match
from bourse.core.offer import Offer
from bourse.market.catalogs import catalog_offers
from bourse.protocol.api import OfferView


def compute_from_flags(flags: dict[str, Any]) -> Compute:
    """A Compute from CLI flags; None-valued flags are left at their defaults."""
    return compute_named(compute_kwargs(flags), set(FLAGS))


def compute_kwargs(flags: dict[str, Any]) -> dict[str, Any]:
    """Compute's keyword arguments of the flags given (None-valued flags are left out)."""
    fields = {
        "gpu": flags.get("gpu"), "gpus": flags.get("gpus"), "gpu_memory": flags.get("gpu_memory"),
        "cpus": flags.get("cpus"), "memory": flags.get("memory"), "disk": flags.get("disk"),
        "spot": flags.get("spot"), "max_price": flags.get("max_price"),
        "regions": flags.get("region") or None,
        "exclude_regions": flags.get("exclude_region") or None,
        "providers": flags.get("provider") or None,
        "exclude_providers": flags.get("exclude_provider") or None,
        "torch": flags.get("torch"), "cuda": flags.get("cuda"), "tags": flags.get("tag") or None,
        "packages": list(flags.get("package") or ()) or None, "image": flags.get("image"),
        "num_nodes": flags.get("nodes"), "min_reliability": flags.get("min_reliability"),
    }
    return {k: v for k, v in fields.items() if v is not None}


def compute_named(kwargs: dict[str, Any], from_flags: set[str]) -> Compute:
    """``Compute(**kwargs)``; an error in a field in ``from_flags`` is named as its flag."""
    try:
        return Compute(**kwargs)
    except InvalidInput as exc:  # named as the flag the user wrote
        field = (exc.field or "").partition(".")[0]
        if field in from_flags:
            exc.field = FLAGS.get(field, exc.field)
        raise


# the flag each Compute field comes from, where the two names differ
FLAGS = {"regions": "--region", "exclude_regions": "--exclude-region",
         "providers": "--provider", "exclude_providers": "--exclude-provider",
         "tags": "--tag", "packages": "--package", "gpu_memory": "--gpu-memory",
         "max_price": "--max-price", "gpu": "--gpu", "gpus": "--gpus", "cpus": "--cpus",
         "memory": "--memory", "disk": "--disk", "spot": "--spot", "torch": "--torch",
         "cuda": "--cuda", "image": "--image", "num_nodes": "--nodes",
         "min_reliability": "--min-reliability"}


def compute_options(command: Any) -> Any:
    """The Compute flags shared by ``offers`` and (later) ``run``."""
    options = [
        click.option("--gpu", help="GPU label or alternatives: a100, a100-40gb, "
                     "h100|a100-80gb, a100:8, 40GB+; gpu (or any) for any GPU, cuda for any "
                     "NVIDIA GPU, cpu for none."),
        click.option("--gpus", type=int, help="Number of GPUs, 1 to 64 (default 1 when --gpu "
                     "is given)."),
        click.option("--gpu-memory", help="Per-GPU memory: 24GB, 40GB+, 24GB..80GB."),
        click.option("--cpus", help="vCPUs: 8 (at least 8), 8+, 8..32; at most 4096."),
        click.option("--memory", help="Host memory: 32GB, 64GB+, 32GB..256GB; at most 64TB."),
        click.option("--disk", help="Disk: 100GB+; at most 1024TB."),
        click.option("--spot", type=click.Choice(SPOT_POLICIES),
                     help="Spot policy (default never)."),
        click.option("--max-price", help="Ceiling in US dollars per hour, e.g. 2 or 0.50 (at "
                     "most 10000)."),
        click.option("--min-reliability", metavar="SHARE",
                     help="Only nodes whose measured reliability score is at least this, e.g. "
                          "0.99 or 99% (nodes watched under an hour and cloud launches have "
                          "none)."),
        click.option("--region", multiple=True,
                     help="Allowed regions or zones (glob: us-east-*, eu-west-[12]; "
                          "repeatable)."),
        click.option("--exclude-region", multiple=True,
                     help="Excluded regions (glob, repeatable)."),
        click.option("--provider", multiple=True, help="Allowed providers (glob, repeatable)."),
        click.option("--exclude-provider", multiple=True, help="Excluded providers (glob)."),
        click.option("--torch", help="PyTorch release the job needs, e.g. 2.1."),
        click.option("--cuda", help="CUDA floor, e.g. '>=12.1'."),
        click.option("--tag", multiple=True, help="Required compliance tag (repeatable)."),
        click.option("--package", multiple=True, help="A requirement the job's virtualenv "
                     "holds, e.g. 'six==1.17.0' (repeatable)."),
        click.option("--image", help="Run in this container image (nodes with docker or "
                     "podman only)."),
        click.option("--nodes", type=int, help="Nodes that run it together, each with all of "
                     "the above (a multi-node job: nodes of one network, started together, "
                     "MASTER_ADDR/NODE_RANK... set; default 1)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


HEADERS = ("PROVIDER", "INSTANCE", "GPU", "COUNT", "GPU MEM", "$/H", "SPOT $/H", "REGION")


def offer_row(m: Match) -> list[str]:
    o = m.offer
    mem = f"{o.gpu_memory_mib / 1024:.0f}GB" if o.gpu_memory_mib else "-"
    region = f"{o.region}/{o.zone}" if o.zone else o.region
    return [o.provider, o.instance_type, o.gpu or "-", str(o.gpu_count), mem,
            money(o.price, o.price_is_floor), money(o.spot_price, o.price_is_floor), region]


def verbose_lines(m: Match) -> list[str]:
    o = m.offer
    facts = {
        "id": o.id, "you pay": f"${m.price:.4f}/h ({'spot' if m.spot else 'on-demand'})",
        "gpu": f"{o.gpu_count} x {o.gpu} ({o.gpu_memory_mib} MiB each)",
        "cpus": o.cpus, "memory": f"{o.memory_gib} GiB" if o.memory_gib else None,
        "disk": f"{o.disk_gib} GiB" if o.disk_gib else "sized at provisioning",
        "driver": o.driver or "installed at provisioning", "max cuda": o.max_cuda,
        "source": o.source, "available": o.available, "sla": o.sla,
        "verified at": o.verified_at, "tags": ", ".join(sorted(o.tags)) or None,
        "note": "price excludes the host VM" if o.price_is_floor else None,
    }
    return [f"  {k:<12} {v if v is not None else 'unknown'}" for k, v in facts.items()]


@click.command()
@compute_options
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--verbose", "-v", is_flag=True, help="Show each offer's full capabilities.")
@click.option("--explain", "show_explain", is_flag=True,
              help="Show how each constraint narrowed the offers.")
@click.option("--data-region", metavar="REGION",
              help="Where the job's data lives: offers in other regions rank behind "
                   "same-region offers of equal price.")
@click.option("--exchange", "on_exchange", is_flag=True,
              help="The configured exchange's live offers (its verified nodes' free "
                   "capacity) instead of the public clouds' catalogues.")
@click.option("--launchable", is_flag=True,
              help="What the configured exchange's enabled clouds could launch now for your "
                   "project (its limits and recently failed places taken out), best first.")
@handles_errors
def offers(limit: int, as_json: bool, verbose: bool, show_explain: bool,
           data_region: str | None, on_exchange: bool, launchable: bool,
           **flags: Any) -> None:
    """List offers that satisfy a requirement, cheapest first (exit 1 when none match).

    By default from the public clouds' price catalogues shipped with bourse; with
    --exchange, what the exchange's nodes can run now; with --launchable, what its clouds
    could launch now."""
    if on_exchange and launchable:
        raise InvalidInput("--exchange and --launchable ask different questions; give one",
                           field="--launchable",
                           hint="--exchange: the live nodes' free capacity; --launchable: "
                                "what the exchange's clouds could launch")
    if data_region is not None and (on_exchange or launchable):
        raise InvalidInput("--data-region ranks the shipped catalogues' offers only",
                           field="--data-region", hint="leave it out with --exchange or "
                                                       "--launchable")
    compute = compute_from_flags(flags)
    if on_exchange or launchable:
        _exchange_offers(compute, limit, as_json, show_explain, launchable)
        return
    all_offers = catalog_offers()
    # the reference matcher, not the index: one query over the ~4000 catalogue offers takes
    # 8-50 ms either way once the index is built (it takes 30), and the client has no numpy
    matches = match(compute, all_offers, limit, data_region=data_region)
    explanation = (_explain(compute, all_offers, data_region)
                   if show_explain or not matches else None)
    if as_json:
        echo_json({"compute": compute, "notes": compute.gpu.notes if compute.gpu else [],
                   "offers": [{"price_per_hour": m.price, "spot": m.spot, "offer": m.offer}
                              for m in matches],
                   "explanation": explanation})
    else:
        _print_human(compute, matches, explanation, verbose)
    if not matches:
        sys.exit(EXIT_NO_RESULT)


EXCHANGE_HEADERS = ("OFFER", "PROVIDER", "NODE", "GPU", "COUNT", "CPUS", "MEMORY", "$/H",
                    "REGION", "RELIABILITY", "VERIFIED SINCE")
LAUNCHABLE_HEADERS = ("OFFER", "CLOUD", "INSTANCE TYPE", "GPU", "COUNT", "CPUS", "MEMORY",
                      "$/H", "REGION", "ZONE")


def _exchange_offers(compute: Compute, limit: int, as_json: bool, show_explain: bool,
                     launchable: bool) -> None:
    from bourse.cli import client as seam

    with seam.open_client() as client:
        found = client.offers(compute, limit, explain=show_explain, launchable=launchable)
    if as_json:
        echo_json(found)
    else:
        for note in compute.gpu.notes if compute.gpu else ():
            click.echo(f"note: {note}", err=True)
        if found.offers:
            headers, row = ((LAUNCHABLE_HEADERS, launchable_row) if launchable
                            else (EXCHANGE_HEADERS, exchange_row))
            click.echo(table(headers, [row(o) for o in found.offers], right=(4, 5, 6, 7)))
        if not found.offers:
            what = "the exchange's clouds could launch" if launchable else "on the exchange"
            click.echo(f"no offer {what} matches {compute.describe()}", err=True)
        out = click.echo if found.offers else (lambda text: click.echo(text, err=True))
        if found.explanation:
            out("\n".join(found.explanation))
    if not found.offers:
        sys.exit(EXIT_NO_RESULT)


def exchange_row(o: OfferView) -> list[str]:
    kind = " (spot)" if o.spot else ""
    verified = (time.strftime("%Y-%m-%d %H:%M", time.localtime(o.verified_at))
                if o.verified_at else "not verified")
    gpu = f"{o.gpu} MIG {o.gpu_slice}" if o.gpu and o.gpu_slice else o.gpu or "-"
    return [o.id, o.provider, o.instance_type, gpu, str(o.gpu_count),
            f"{o.cpus:g}" if o.cpus is not None else "-",
            f"{o.memory_gib:.0f}GiB" if o.memory_gib is not None else "-",
            f"{o.price_per_hour:.4f}{kind}", o.region,
            f"{o.sla:.1%}" if o.sla is not None else "-", verified]


def launchable_row(o: OfferView) -> list[str]:
    """A cloud offer: no node yet, so neither a record nor a verification; its zone."""
    return [*exchange_row(o)[:9], o.zone or "-"]


def _explain(compute: Compute, all_offers: tuple[Offer, ...],
             data_region: str | None) -> Explanation:
    from bourse.core.match import explain

    return explain(compute, all_offers, data_region=data_region)


def _print_human(compute: Compute, matches: list[Match], explanation: Explanation | None,
                 verbose: bool) -> None:
    for note in compute.gpu.notes if compute.gpu else ():
        click.echo(f"note: {note}", err=True)
    if matches:
        click.echo(table(HEADERS, [offer_row(m) for m in matches], right=(3, 4, 5, 6)))
        if verbose:
            for m in matches:
                click.echo(f"\n{m.offer.id}")
                click.echo("\n".join(verbose_lines(m)))
    if explanation is not None:
        out = click.echo if matches else (lambda text: click.echo(text, err=True))
        if not matches:
            out(f"no offer matches {compute.describe()}")
        out("\n".join(explanation.lines()))
