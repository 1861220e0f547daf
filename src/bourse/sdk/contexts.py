"""Named contexts: the exchanges a user works with, one of them current (as kubectl's).

They live in ``contexts.json`` in the user's config dir: ``$BOURSE_HOME`` when it is set,
else ``$XDG_CONFIG_HOME/bourse``, else ``~/.config/bourse``::

    {"current": "prod",
     "contexts": {"prod": {"url": "https://bourse.example.com", "token": "..."},
                  "local": {"url": "http://127.0.0.1:8470", "token": "..."}}}

The file holds secrets: it is created with mode 0600 (its folder 0700) and replaced
atomically, never readable by others and never half-written.

Before contexts, one exchange was kept in ``$BOURSE_HOME/credentials.json``
(``~/.bourse/credentials.json`` without ``BOURSE_HOME``). While there is no contexts file, that
file is read as the context ``default`` (current); the first write copies it into the contexts
file, after which it is no longer read (it is left in place for older versions of bourse).

``Contexts`` is a plain value (edits return a new one); reading and writing are the functions
at the end of the module.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bourse.core.errors import InvalidInput

CONTEXTS_FILE = "contexts.json"
LEGACY_FILE = "credentials.json"
LEGACY_NAME = "default"  # what the legacy credentials file is read as
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Context:
    name: str
    url: str
    token: str

    def __repr__(self) -> str:  # keep the token out of logs and tracebacks
        return f"Context(name={self.name!r}, url={self.url!r}, token='***')"


@dataclass(frozen=True)
class Contexts:
    """What the contexts file holds. ``path`` is the contexts file; ``legacy`` the legacy
    credentials file read in its place while there is none."""

    entries: tuple[Context, ...] = ()
    current: str | None = None
    path: Path | None = None
    legacy: Path | None = None

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.entries]

    def find(self, name: str) -> Context | None:
        return next((c for c in self.entries if c.name == name), None)

    def get(self, name: str) -> Context:
        """The context ``name``, or an error naming the nearest known one."""
        found = self.find(name)
        if found is None:
            raise unknown_context(name, self.names, self.path)
        return found

    def active(self) -> Context | None:
        return self.find(self.current) if self.current else None

    def put(self, context: Context, *, use: bool = False) -> Contexts:
        """With ``context`` added, or replacing the one of its name; current when ``use``
        or when no context was current."""
        kept = tuple(c for c in self.entries if c.name != context.name)
        current = context.name if use or self.active() is None else self.current
        return replace(self, entries=(*kept, context), current=current)

    def use(self, name: str) -> Contexts:
        return replace(self, current=self.get(name).name)

    def remove(self, name: str) -> Contexts:
        gone = self.get(name)
        current = None if self.current == gone.name else self.current
        return replace(self, entries=tuple(c for c in self.entries if c is not gone),
                       current=current)

    def to_json(self) -> dict[str, Any]:
        return {"current": self.current,
                "contexts": {c.name: {"url": c.url, "token": c.token} for c in self.entries}}


def unknown_context(name: str, known: list[str], path: Path | None) -> InvalidInput:
    near = difflib.get_close_matches(name, known, n=1)
    if near:
        hint = f"did you mean {near[0]!r}?"
    elif known:
        hint = f"the contexts are {', '.join(known)}"
    else:
        hint = "add one with `bourse context add NAME --url URL --token-stdin`"
    where = f" in {path}" if path else ""
    return InvalidInput(f"no context {name!r}{where}", field="context", hint=hint)


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise InvalidInput(f"{name!r} is not a context name", field="context",
                           hint="use 1-64 letters, digits, '.', '_' and '-', starting with a "
                                "letter or digit, e.g. prod or lab-2")
    return name


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"{url!r} is not an exchange URL", field="url",
                           hint="give http(s)://HOST[:PORT], e.g. http://127.0.0.1:8470")
    return url.rstrip("/")


def check_token(token: str) -> str:
    token = token.strip()
    if not token or any(c.isspace() for c in token):
        raise InvalidInput("the token is empty or holds spaces", field="token",
                           hint="give the token `bourse tokens create` printed, on one line")
    return token


def parse(data: Any, path: Path) -> Contexts:
    """The contexts file's JSON as ``Contexts``; anything else is an error naming the file."""
    if not isinstance(data, dict) or not isinstance(data.get("contexts", {}), dict):
        raise corrupt(path, "is not a JSON object with a \"contexts\" object")
    current = data.get("current")
    if current is not None and not isinstance(current, str):
        raise corrupt(path, "has a \"current\" that is not a string")
    entries = []
    for name, value in data.get("contexts", {}).items():
        if not (isinstance(value, dict) and isinstance(value.get("url"), str)
                and isinstance(value.get("token"), str)):
            raise corrupt(path, f"has a context {name!r} without string url and token")
        entries.append(Context(name, value["url"], value["token"]))
    return Contexts(tuple(entries), current, path)


def parse_legacy(data: Any, path: Path) -> Contexts:
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k, ""), str) for k in ("url", "token")):
        raise corrupt(path, "is not a JSON object with string url and token")
    if not data.get("url") or not data.get("token"):
        return Contexts(legacy=path)
    context = Context(LEGACY_NAME, data["url"], data["token"])
    return Contexts((context,), LEGACY_NAME, legacy=path)


def corrupt(path: Path, what: str) -> InvalidInput:
    return InvalidInput(f"{path} {what}",
                        hint="fix or remove it, then `bourse context add` (or `bourse login`)")


# -- the files ------------------------------------------------------------------------------

def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def bourse_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$BOURSE_HOME``, else ``~/.bourse``: the local exchange's state and the legacy
    credentials file."""
    home = _env(environ).get("BOURSE_HOME")
    return Path(home).expanduser() if home else Path.home() / ".bourse"


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$BOURSE_HOME``, else ``$XDG_CONFIG_HOME/bourse``, else ``~/.config/bourse``."""
    env = _env(environ)
    if env.get("BOURSE_HOME"):
        return Path(env["BOURSE_HOME"]).expanduser()
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".config"  # relative: ignored
    return base / "bourse"


def contexts_path(environ: Mapping[str, str] | None = None) -> Path:
    return config_dir(environ) / CONTEXTS_FILE


def legacy_path(environ: Mapping[str, str] | None = None) -> Path:
    return bourse_home(environ) / LEGACY_FILE


def load_contexts(environ: Mapping[str, str] | None = None) -> Contexts:
    """The contexts file; without one, the legacy credentials file as ``default``."""
    path = contexts_path(environ)
    data = _read_json(path)
    if data is not None:
        return parse(data, path)
    legacy = legacy_path(environ)
    data = _read_json(legacy)
    if data is not None:
        return replace(parse_legacy(data, legacy), path=path)
    return Contexts(path=path)


def save_contexts(contexts: Contexts, environ: Mapping[str, str] | None = None) -> Path:
    """Write the contexts file (atomically, mode 0600); returns its path."""
    path = contexts_path(environ)
    write_private(path, json.dumps(contexts.to_json(), indent=2) + "\n")
    return path


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except ValueError:
        raise corrupt(path, "is not JSON") from None


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: mode 0600 from the first byte (mkstemp creates it with
    O_EXCL and 0600), its folder 0700, renamed into place once written and synced."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
