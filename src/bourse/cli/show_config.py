"""``--show-config``: every setting of ``bourse server`` or ``bourse agent``, its value and
where it came from, with secrets masked; and the settings table of docs/configuration.md."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click
from click.core import ParameterSource

from bourse.cli.render import echo_json, table
from bourse.cli.settings import FILE_META, Settings, env_names, flag_of, setting_options

MASK = "***"
SOURCES = {ParameterSource.COMMANDLINE: "flag", ParameterSource.ENVIRONMENT: "env",
           ParameterSource.DEFAULT_MAP: "file", ParameterSource.DEFAULT: "default",
           ParameterSource.PROMPT: "prompt"}


@dataclass(frozen=True)
class Shown:
    flag: str
    value: Any  # masked where secret
    source: str  # flag, env, file, default
    origin: str | None  # the variable or the file that gave it

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.flag, "flag": f"--{self.flag}", "value": self.value,
                "source": self.source, "from": self.origin}


def describe(ctx: click.Context, settings: Settings) -> list[Shown]:
    """Each setting of the command ``ctx`` ran, as resolved."""
    file = ctx.meta.get(FILE_META)
    shown = []
    for option in setting_options(ctx.command):
        assert option.name is not None
        source = SOURCES.get(ctx.get_parameter_source(option.name) or ParameterSource.DEFAULT,
                             "default")
        origin = {"env": _variable(option, settings), "file": str(file) if file else None}
        flag = flag_of(option)
        shown.append(Shown(flag, masked(flag, plain(ctx.params.get(option.name)), settings),
                           source, origin.get(source)))
    return shown


def _variable(option: click.Option, settings: Settings) -> str | None:
    """The variable click read: the first of the option's names that is set, not empty."""
    return next((n for n in env_names(option, settings) if os.environ.get(n)), None)


def plain(value: Any) -> Any:
    """A value as JSON has it: paths as strings, tuples as lists."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value


def masked(flag: str, value: Any, settings: Settings) -> Any:
    """Secrets whole, and the password of any URL (``postgresql://u:***@host/db``)."""
    if value in (None, "", []):
        return value
    if flag in settings.secrets:
        return MASK
    if isinstance(value, list):
        return [masked(flag, v, settings) for v in value]
    return mask_url(value) if isinstance(value, str) else value


def mask_url(text: str) -> str:
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:
        return text
    if not password:
        return text
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def show_config(ctx: click.Context, settings: Settings, as_json: bool) -> None:
    shown = describe(ctx, settings)
    file = ctx.meta.get(FILE_META)
    if as_json:
        echo_json({"command": settings.command, "file": str(file) if file else None,
                   "settings": [s.to_json() for s in shown]})
        return
    click.echo(f"bourse {settings.command}: config file {file or 'none'}")
    rows = [[f"--{s.flag}", text(s.value), s.source + (f" {s.origin}" if s.origin else "")]
            for s in shown]
    click.echo(table(("SETTING", "VALUE", "SOURCE"), rows))


def text(value: Any) -> str:
    if value is None or value == []:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


# -- the docs' table ------------------------------------------------------------------------

def settings_table(command: click.Command, settings: Settings) -> str:
    """A Markdown table of the command's settings: flag, variables, default, what it does."""
    lines = ["| flag (file key) | environment | default | what it sets |",
             "|---|---|---|---|"]
    for option in setting_options(command):
        flag = flag_of(option)
        names = ", ".join(f"`{n}`" for n in env_names(option, settings))
        default = settings.doc_defaults.get(flag) or _default(option)
        about = " ".join((option.help or "").split()).replace("|", "\\|")
        lines.append(f"| `--{flag}` | {names} | {default} | {about} |")
    return "\n".join(lines)


def _default(option: click.Option) -> str:
    if option.is_flag and not option.multiple:
        return "false"
    value = plain(option.to_info_dict().get("default"))  # None where click has its UNSET
    if value is None or value == [] or callable(value):
        return "-"
    return f"`{text(value)}`"


def refresh_doc(text: str, tables: dict[str, str]) -> str:
    """``text`` with the block between ``<!-- settings:NAME -->`` and ``<!-- /settings:NAME
    -->`` replaced by ``tables[NAME]``, for each name."""
    for name, body in tables.items():
        start, end = f"<!-- settings:{name} -->", f"<!-- /settings:{name} -->"
        head, found, rest = text.partition(start)
        if not found or end not in rest:
            raise ValueError(f"the doc has no {start} ... {end} block")
        text = f"{head}{start}\n{body}\n{end}{rest.partition(end)[2]}"
    return text


def doc_tables() -> dict[str, str]:
    from bourse.cli.agent import SETTINGS as AGENT
    from bourse.cli.agent import agent
    from bourse.cli.server import SETTINGS as SERVER
    from bourse.cli.server import server
    return {"server": settings_table(server, SERVER), "agent": settings_table(agent, AGENT)}


if __name__ == "__main__":  # python -m bourse.cli.show_config docs/configuration.md
    import sys
    doc = Path(sys.argv[1])
    doc.write_text(refresh_doc(doc.read_text(), doc_tables()))
