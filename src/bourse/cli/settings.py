"""Where ``bourse server`` and ``bourse agent`` take their settings from.

Each flag, else its ``BOURSE_*`` variable, else the config file, else its default (click's own
order: command line, ``envvar``, ``default_map``, default; ``ctx.get_parameter_source`` says
which gave a value, and ``--show-config`` prints it). The flags are the one list of settings:
their variables and file keys are derived from their names, so a new flag is configurable
everywhere at once.

The file is TOML, one top-level key per flag, named as the flag without its dashes
(``database-url = "postgresql+asyncpg://..."``, ``cloud = ["aws"]``, ``allow-unverified =
true``). ``--config FILE`` names it; without it the first that exists of
``<config dir>/server.toml`` (``$BOURSE_HOME``, else ``~/.config/bourse``) and
``/etc/bourse/server.toml`` is read (``agent.toml`` for the agent); ``--config none`` reads
none. A key that names no flag is refused, naming the file, its line and the nearest flag.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from bourse.core.errors import InvalidInput
from bourse.sdk.contexts import config_dir

SYSTEM_DIR = Path("/etc/bourse")
NO_FILE = "none"
# the options the machinery adds: they say where settings come from, they are none
OWN = ("config_file", "show_config", "show_config_json")
FILE_META = "bourse.settings_file"
C = TypeVar("C", bound=click.Command)


@dataclass(frozen=True)
class Settings:
    """How one command's settings are named outside its flags."""

    command: str  # server, agent
    prefix: str  # of the variables derived from flag names: BOURSE_, BOURSE_AGENT_
    file_name: str  # server.toml
    config_env: str  # the variable that names the file
    env: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # flag -> other names
    secrets: frozenset[str] = frozenset()  # flags whose values are never shown
    doc_defaults: Mapping[str, str] = field(default_factory=dict)  # flag -> default, in words


def flag_of(option: click.Option) -> str:
    """The option's long name without dashes: its file key."""
    longs = [o for o in option.opts if o.startswith("--")]
    return max(longs, key=len).removeprefix("--")


def env_names(option: click.Option, settings: Settings) -> tuple[str, ...]:
    if option.envvar:  # a name it had before
        return (option.envvar,) if isinstance(option.envvar, str) else tuple(option.envvar)
    flag = flag_of(option)
    return settings.env.get(flag, (settings.prefix + flag.upper().replace("-", "_"),))


def setting_options(command: click.Command) -> list[click.Option]:
    """The command's options that are settings (all but --help and the machinery's own)."""
    return [p for p in command.params if isinstance(p, click.Option)
            and p.name not in OWN and p.name != "help"]


def configurable(settings: Settings) -> Callable[[C], C]:
    """Give every option of the command its variable (shown in --help), and add --config,
    --show-config and --json (for --show-config)."""

    def apply(command: C) -> C:
        for option in setting_options(command):
            option.envvar = list(env_names(option, settings))
            option.show_envvar = True
        command.params += _own_options(settings)
        command.callback = _showing(command.callback, settings)
        return command

    return apply


def _own_options(settings: Settings) -> list[click.Option]:
    name = settings.file_name
    return [
        click.Option(["--config", "config_file"], metavar="FILE", is_eager=True,
                     envvar=settings.config_env, show_envvar=True,
                     callback=functools.partial(_read_file, settings),
                     help=f"A TOML file of settings, one key per flag (port = 8470); flags "
                          f"and variables win over it. Default: the first that exists of "
                          f"$BOURSE_HOME/{name} (without BOURSE_HOME: ~/.config/bourse/{name}) "
                          f"and /etc/bourse/{name}; `{NO_FILE}`: no file."),
        click.Option(["--show-config"], is_flag=True,
                     help="Print every setting, where it came from (flag, env, file or "
                          "default) with secrets masked, and exit."),
        click.Option(["--json", "show_config_json"], is_flag=True,
                     help="With --show-config: as JSON."),
    ]


def _showing(callback: Callable[..., Any] | None,
             settings: Settings) -> Callable[..., Any]:
    assert callback is not None

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("config_file")
        show, as_json = kwargs.pop("show_config"), kwargs.pop("show_config_json")
        if show:
            from bourse.cli.show_config import show_config
            show_config(click.get_current_context(), settings, as_json)
            return None
        if as_json:
            raise click.UsageError("--json goes with --show-config")
        return callback(*args, **kwargs)

    return run


def default_files(file_name: str, environ: Mapping[str, str]) -> list[Path]:
    """Where the file is looked for when --config does not name one, in order."""
    return [config_dir(environ) / file_name, SYSTEM_DIR / file_name]


def chosen_file(value: str | None, file_name: str, environ: Mapping[str, str]) -> Path | None:
    if value == NO_FILE:
        return None
    if value:
        return Path(value).expanduser()
    return next((p for p in default_files(file_name, environ) if p.is_file()), None)


def _read_file(settings: Settings, ctx: click.Context, param: click.Parameter,
               value: str | None) -> str | None:
    path = chosen_file(value, settings.file_name, os.environ)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise click.UsageError(f"cannot read the config file {path}: {exc.strerror}",
                               ctx) from None
    try:
        values = parse_settings(text, path, setting_options(ctx.command))
    except InvalidInput as exc:
        raise click.UsageError(str(exc), ctx) from None
    ctx.default_map = {**(ctx.default_map or {}), **values}
    ctx.meta[FILE_META] = path
    return str(path)


def parse_settings(text: str, path: Path, options: list[click.Option]) -> dict[str, Any]:
    """The file's settings as click's ``default_map`` (parameter name -> value), every key
    and value checked against the option it names."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{path}: not valid TOML: {exc}") from None
    by_flag = {flag_of(o): o for o in options}
    values: dict[str, Any] = {}
    for key, value in data.items():
        line = line_of(text, key)
        where = f"{path}:{line}" if line else str(path)
        option = by_flag.get(key.replace("_", "-"))
        if option is None:
            raise unknown_key(key, where, list(by_flag), table=isinstance(value, dict))
        assert option.name is not None
        values[option.name] = checked(value, option, f"{where}: {key}")
    return values


def unknown_key(key: str, where: str, known: list[str], *, table: bool = False) -> InvalidInput:
    near = difflib.get_close_matches(key.replace("_", "-"), known, n=1)
    hint = (f"did you mean {near[0]!r}?" if near else
            "the keys are the flags' names without their dashes (see --help)")
    if table:
        inside = [k for k in known if k.startswith(f"{key}-")]
        hint = ("settings are top-level keys, not tables: " +
                (f"write {inside[0]} = ... (and {', '.join(inside[1:])})" if len(inside) > 1
                 else f"write {inside[0]} = ..." if inside else hint))
    return InvalidInput(f"{where}: unknown setting {key!r}", hint=hint)


def line_of(text: str, key: str) -> int | None:
    """The line ``key`` is set on (``key =`` or ``[key]``), for the error that names it."""
    name = re.escape(key)
    pattern = re.compile(rf"^[ \t]*(\[\s*[\"']?{name}[\"']?\s*\]|[\"']?{name}[\"']?\s*=)",
                         re.MULTILINE)
    found = pattern.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else None


def checked(value: Any, option: click.Option, where: str) -> Any:
    """``value`` if it is of the option's kind and its type takes it."""
    if option.multiple:
        items = value if isinstance(value, list) else [value]
    elif isinstance(value, list | dict):
        raise InvalidInput(f"{where}: give one value, not a {type(value).__name__}")
    else:
        items = [value]
    for item in items:
        _check_one(item, option, where)
    return items if option.multiple else value


def _check_one(item: Any, option: click.Option, where: str) -> None:
    if option.is_flag and not isinstance(item, bool):
        raise InvalidInput(f"{where}: give true or false, not {item!r}")
    if not option.is_flag and (isinstance(item, bool) or not isinstance(item, str | int | float)):
        raise InvalidInput(f"{where}: give a string or a number, not {item!r}")
    try:
        option.type.convert(item, option, None)
    except click.BadParameter as exc:
        raise InvalidInput(f"{where}: {exc.message}") from None
