"""Shell completion: ``bourse completion bash|zsh|fish`` prints the script click generates;
job and node arguments complete with the ids the exchange knows.

A completion asks the exchange with a short timeout and says nothing when it cannot (no
credentials, an exchange that is down, a refused token): a shell's Tab must never print an
error or hang the prompt.
"""

from __future__ import annotations

from collections.abc import Callable

import click
from click.shell_completion import CompletionItem, get_completion_class

from bourse.cli import client as seam
from bourse.sdk.client import Client

TIMEOUT_S = 2.0
SHELLS = ("bash", "zsh", "fish")
Ask = Callable[[Client], list[CompletionItem]]


def _asked(ask: Ask, incomplete: str) -> list[CompletionItem]:
    try:
        with seam.open_client(timeout=TIMEOUT_S) as client:
            items = ask(client)
    except Exception:
        return []
    return [i for i in items if str(i.value).startswith(incomplete)]


def job_ids(ctx: click.Context, param: click.Parameter,
            incomplete: str) -> list[CompletionItem]:
    """The newest jobs' ids, each with its name and state as help."""
    return _asked(lambda client: [
        CompletionItem(j.id, help=" ".join(filter(None, (j.name, j.state))))
        for j in client.jobs(limit=100)], incomplete)


def node_ids(ctx: click.Context, param: click.Parameter,
             incomplete: str) -> list[CompletionItem]:
    """Nodes' ids, each with its name as help."""
    return _asked(lambda client: [CompletionItem(n.id, help=n.name)
                                  for n in client.nodes()], incomplete)


def node_refs(ctx: click.Context, param: click.Parameter,
              incomplete: str) -> list[CompletionItem]:
    """Nodes' ids and names (``bourse nodes show`` takes either)."""
    return _asked(lambda client: [item for n in client.nodes() for item in
                                  (CompletionItem(n.id, help=n.name),
                                   CompletionItem(n.name, help=n.id))], incomplete)


def script(shell: str, prog: str = "bourse") -> str:
    """The completion script click writes for ``shell``."""
    from bourse.cli.main import cli

    kind = get_completion_class(shell)
    assert kind is not None  # SHELLS are the ones click ships
    variable = f"_{prog.replace('-', '_').upper()}_COMPLETE"
    return kind(cli, {}, prog, variable).source()


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the shell's completion script. Install it with one line:

    \b
      bash: eval "$(bourse completion bash)"   in ~/.bashrc
      zsh:  eval "$(bourse completion zsh)"    in ~/.zshrc
      fish: bourse completion fish > ~/.config/fish/completions/bourse.fish
    """
    click.echo(script(shell))
