"""``bourse demo``: what ``make demo`` runs.

First a short tour of the market on the real catalogues shipped with bourse: a requirement
matched cheapest-first, a wrong GPU label caught with a suggestion, an impossible requirement
explained, and driver/torch compatibility decided before placement. Then a throwaway local
exchange (a coordinator with its object store and two agents, in a temp dir) runs the
three-stage digits app: where each stage ran, how long, what it cost, and the test accuracy.
"""

from __future__ import annotations

import click

from bourse.cli.demo_exchange import app_tour
from bourse.cli.errors import handles_errors
from bourse.cli.offers import HEADERS, offer_row
from bourse.cli.render import table
from bourse.core.compute import Compute
from bourse.core.cuda import can_run
from bourse.core.errors import BourseError
from bourse.core.match import explain
from bourse.market.catalogs import catalog_offers
from bourse.market.index import OfferIndex


def _heading(text: str) -> None:
    click.echo(click.style(f"\n== {text}", bold=True))


@click.command()
@click.option("--market-only", is_flag=True, help="Skip the local exchange part.")
@click.option("--keep", is_flag=True, envvar="BOURSE_DEMO_KEEP",
              help="Leave the demo exchange running at the end, to browse its web UI "
                   "(env: BOURSE_DEMO_KEEP=1).")
@handles_errors
def demo(market_only: bool, keep: bool) -> None:
    """Run the bourse demo (what `make demo` runs)."""
    market_tour()
    if not market_only:
        app_tour(keep)


def market_tour() -> None:
    offers = catalog_offers()
    index = OfferIndex(offers)
    providers = len({o.provider for o in offers})
    click.echo(f"bourse market: {len(offers):,} real GPU offers from {providers} clouds")

    _heading("one a100-40gb under $2/h, cheapest first  (bourse offers --gpu a100-40gb "
             "--max-price 2)")
    compute = Compute("a100-40gb", max_price=2)
    click.echo(table(HEADERS, [offer_row(m) for m in index.match(compute, 3)],
                     right=(3, 4, 5, 6)))

    _heading("a wrong label is an error, never a silent no-match  (bourse offers --gpu a100-40)")
    try:
        Compute("a100-40")
    except BourseError as exc:
        click.echo(f"error: {exc}")

    _heading("nothing matches: bourse says why  (bourse offers --gpu h100:8 --max-price 5)")
    click.echo("\n".join(explain(Compute("h100:8", max_price=5), offers, nearest=3).lines()))

    _heading("environments are checked before placement")
    for driver, gpu, torch in (("515.65.01", "a100-40gb", "2.0.1"),
                               ("470.82.01", "a100-40gb", "2.1"),
                               ("580.95.05", "v100-16gb", "2.13")):
        click.echo(f"driver {driver} + {gpu} + torch {torch}: "
                   f"{can_run(driver, gpu, torch=torch)}")
