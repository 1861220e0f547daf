"""Where the SDK and the CLI find the exchange.

Per value, the first that gives one: what the caller passed (``Client(url, token)``), then
``BOURSE_URL`` and ``BOURSE_TOKEN``, then a context (``sdk.contexts``): the one named by the
caller (``Client(context=...)``, ``bourse --context NAME``), else by ``BOURSE_CONTEXT``, else
the current one of the contexts file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bourse.sdk.contexts import (
    Context,
    bourse_home,
    check_name,
    check_token,
    check_url,
    contexts_path,
    legacy_path,
    load_contexts,
    save_contexts,
)
from bourse.sdk.errors import NotConfigured

__all__ = ["Credentials", "Resolved", "bourse_home", "credentials_path", "load_credentials",
           "resolve", "resolve_credentials", "save_credentials"]


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str

    def __repr__(self) -> str:  # keep the token out of logs and tracebacks
        return f"Credentials(url={self.url!r}, token='***')"


@dataclass(frozen=True)
class Resolved:
    """The credentials and where each came from (``argument``, ``BOURSE_URL``,
    ``BOURSE_TOKEN`` or ``context NAME``); ``context`` is the context looked at, if any."""

    credentials: Credentials
    url_from: str
    token_from: str
    context: str | None
    path: Path


def credentials_path(environ: Mapping[str, str] | None = None) -> Path:
    """The legacy credentials file (read as the context ``default`` while no contexts file
    exists)."""
    return legacy_path(environ)


def load_credentials(environ: Mapping[str, str] | None = None) -> Credentials:
    """The exchange's URL and token: the environment first, then the context in use."""
    return resolve_credentials(None, None, environ)


def resolve_credentials(url: str | None, token: str | None,
                        environ: Mapping[str, str] | None = None,
                        context: str | None = None) -> Credentials:
    """Explicit values first, then ``BOURSE_URL``/``BOURSE_TOKEN``, then the context."""
    return resolve(url, token, environ, context).credentials


def resolve(url: str | None, token: str | None, environ: Mapping[str, str] | None = None,
            context: str | None = None) -> Resolved:
    env = os.environ if environ is None else environ
    url_from = "argument" if url else "BOURSE_URL"
    token_from = "argument" if token else "BOURSE_TOKEN"
    url, token = url or env.get("BOURSE_URL"), token or env.get("BOURSE_TOKEN")
    found = None if url and token else _context(context or env.get("BOURSE_CONTEXT"), env)
    if found is not None and not url:
        url, url_from = found.url, f"context {found.name}"
    if found is not None and not token:
        token, token_from = found.token, f"context {found.name}"
    if not url or not token:
        raise _not_configured(url, token, contexts_path(env))
    return Resolved(Credentials(url, token), url_from, token_from,
                    found.name if found else None, contexts_path(env))


def _not_configured(url: str | None, token: str | None, path: Path) -> NotConfigured:
    missing = " and ".join(n for n, v in (("URL", url), ("token", token)) if not v)
    return NotConfigured(
        f"no exchange {missing} configured (looked at BOURSE_URL, BOURSE_TOKEN and {path})",
        hint="run `bourse up` to start a local exchange, or `bourse login URL` (or `bourse "
             "context add`) to use one")


def _context(name: str | None, env: Mapping[str, str]) -> Context | None:
    """The context named (an error if there is none of that name), else the current one."""
    contexts = load_contexts(env)
    return contexts.get(name) if name else contexts.active()


def save_credentials(url: str, token: str, environ: Mapping[str, str] | None = None,
                     context: str = "default") -> Path:
    """Add (or update) the context ``context`` with this URL and token and make it current;
    returns the contexts file's path."""
    entry = Context(check_name(context), check_url(url), check_token(token))
    return save_contexts(load_contexts(environ).put(entry, use=True), environ)
