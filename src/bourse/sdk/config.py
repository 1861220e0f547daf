"""Where the SDK and the CLI find the exchange.

``BOURSE_URL`` and ``BOURSE_TOKEN`` win; otherwise ``$BOURSE_HOME/credentials.json``
(``BOURSE_HOME`` defaults to ``~/.bourse``) holds ``{"url": ..., "token": ...}``. The file holds
a secret, so it is created with mode 0600 and replaced atomically: it is never readable by
others, not even for an instant, and never half-written.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bourse.core.errors import InvalidInput
from bourse.sdk.errors import NotConfigured

CREDENTIALS_FILE = "credentials.json"


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str

    def __repr__(self) -> str:  # keep the token out of logs and tracebacks
        return f"Credentials(url={self.url!r}, token='***')"


def bourse_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    home = env.get("BOURSE_HOME")
    return Path(home).expanduser() if home else Path.home() / ".bourse"


def credentials_path(environ: Mapping[str, str] | None = None) -> Path:
    return bourse_home(environ) / CREDENTIALS_FILE


def load_credentials(environ: Mapping[str, str] | None = None) -> Credentials:
    """The exchange's URL and token: the environment first, then the credentials file."""
    return resolve_credentials(None, None, environ)


def resolve_credentials(url: str | None, token: str | None,
                        environ: Mapping[str, str] | None = None) -> Credentials:
    """Explicit values first, then ``BOURSE_URL``/``BOURSE_TOKEN``, then the credentials file."""
    env = os.environ if environ is None else environ
    path = credentials_path(env)
    url = url or env.get("BOURSE_URL")
    token = token or env.get("BOURSE_TOKEN")
    if not url or not token:
        stored = _read_file(path)
        url, token = url or stored.get("url"), token or stored.get("token")
    if not url or not token:
        missing = " and ".join(n for n, v in (("URL", url), ("token", token)) if not v)
        raise NotConfigured(
            f"no exchange {missing} configured (looked at BOURSE_URL, BOURSE_TOKEN and {path})",
            hint="run `bourse up` to start a local exchange, or `bourse login URL` to use one")
    return Credentials(url=str(url), token=str(token))


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", field="credentials") from exc
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k, ""), str) for k in ("url", "token")):
        raise InvalidInput(f"{path} is not a JSON object with string url and token",
                           field="credentials", hint="run `bourse login` to rewrite it")
    return data


def save_credentials(url: str, token: str, environ: Mapping[str, str] | None = None) -> Path:
    """Write the credentials file atomically with mode 0600; returns its path."""
    path = credentials_path(environ)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    payload = json.dumps({"url": url, "token": token}, indent=2) + "\n"
    # mkstemp creates the file with O_EXCL and mode 0600 from the start
    fd, tmp = tempfile.mkstemp(prefix=".credentials-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
