"""``bourse ui``: the web UI of the configured exchange, signed in.

Prints a sign-in link whose token sits after ``#``, which the browser never sends anywhere
(docs/ui.md), or opens it in the browser with ``--open``. The token is the one the CLI uses
(``BOURSE_URL``/``BOURSE_TOKEN`` or the credentials file), so the link signs in as you.
"""

from __future__ import annotations

import webbrowser
from urllib.parse import quote

import click

from bourse.cli.errors import handles_errors
from bourse.cli.render import echo_json
from bourse.core.errors import BourseError
from bourse.sdk.config import load_credentials

PAGES = ("jobs", "runs", "nodes", "offers")


def sign_in_link(url: str, token: str, page: str | None = None) -> str:
    """``<url>/ui/login[?next=/ui/<page>]#token=<token>``."""
    target = f"?next={quote(f'/ui/{page}', safe='/')}" if page else ""
    return f"{url.rstrip('/')}/ui/login{target}#token={quote(token, safe='')}"


@click.command()
@click.argument("page", required=False, type=click.Choice(PAGES))
@click.option("--open", "open_browser", is_flag=True, help="Open it in the browser too.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handles_errors
def ui(page: str | None, open_browser: bool, as_json: bool) -> None:
    """Print a link that opens the exchange's web UI signed in (PAGE: where to land).

    The link holds your token after '#': anyone who has it can act as you until the token
    expires or is revoked. Share the page's address, not this link."""
    creds = load_credentials()
    link = sign_in_link(creds.url, creds.token, page)
    if as_json:
        echo_json({"url": f"{creds.url.rstrip('/')}/ui/", "sign_in": link})
    else:
        click.echo(link)
    if open_browser and not webbrowser.open(link):
        raise BourseError("no browser could be started here",
                          hint="open the printed link on a machine that has one")
