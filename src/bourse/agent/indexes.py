"""Where a node's job environments get their packages: package indexes and find-links.

uv does not read pip's configuration, but a machine's pip configuration is where its owner
said where packages come from (a mirror, a wheel directory, no PyPI at all). So by default
the agent reads it the way pip does — the files in pip's order (global, user, then
``PIP_CONFIG_FILE``), ``[global]`` then ``[install]``, then ``PIP_*`` variables — and hands
the result to uv as command-line options. ``bourse agent --index-url/--extra-index-url/
--find-links`` replace it.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_KEYS = ("index-url", "extra-index-url", "find-links", "no-index")


@dataclass(frozen=True)
class PackageSources:
    index_url: str | None = None  # None: uv's default (PyPI)
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False

    def uv_args(self) -> list[str]:
        args = ["--no-index"] if self.no_index else []
        if self.index_url and not self.no_index:
            args += ["--index-url", self.index_url]
        for url in () if self.no_index else self.extra_index_urls:
            args += ["--extra-index-url", url]
        for link in self.find_links:
            args += ["--find-links", link]
        return args

    def describe(self) -> str:
        parts = ([] if self.no_index else [self.index_url or "PyPI", *self.extra_index_urls])
        return ", ".join([*parts, *self.find_links]) or "nowhere (no index, no find-links)"


def from_pip_config(texts: Iterable[str], environ: Mapping[str, str]) -> PackageSources:
    """The sources pip would use, from its config files' texts (in pip's order) and the
    environment (pure)."""
    values: dict[str, str] = {}
    for text in texts:
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text)
        except configparser.Error:
            continue  # pip refuses such a file too; it adds nothing here
        for section in ("global", "install"):
            if parser.has_section(section):
                values |= {k: v for k, v in parser.items(section) if k in _KEYS}
    for key in _KEYS:
        env = environ.get("PIP_" + key.upper().replace("-", "_"))
        if env is not None:
            values[key] = env
    return PackageSources(
        index_url=values.get("index-url") or None,
        extra_index_urls=tuple(values.get("extra-index-url", "").split()),
        find_links=tuple(values.get("find-links", "").split()),
        no_index=values.get("no-index", "").strip().lower() in ("1", "true", "yes", "on"))


def pip_config_files(environ: Mapping[str, str]) -> list[Path]:
    """pip's configuration files, lowest priority first (pip's ``configuration`` module)."""
    xdg_dirs = environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    home = Path(environ.get("HOME", "~")).expanduser()
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs) if d]
    files += [Path("/etc/pip.conf"), home / ".pip" / "pip.conf", config_home / "pip" / "pip.conf"]
    if environ.get("PIP_CONFIG_FILE"):
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def pip_sources(environ: Mapping[str, str] | None = None) -> PackageSources:
    """The sources pip's configuration names on this machine."""
    environ = os.environ if environ is None else environ
    texts = []
    for path in pip_config_files(environ):
        try:
            texts.append(path.read_text())
        except (OSError, UnicodeDecodeError):
            continue
    return from_pip_config(texts, environ)
