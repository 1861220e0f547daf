"""The CLI and SDK references in docs/reference/, generated from the code:

    python -m bourse.cli.reference          # writes docs/reference/cli.md and sdk.md
    python -m bourse.cli.reference --check  # exits 1 when either differs from the code

The CLI reference is each command's ``--help`` as click prints it at a fixed width; the SDK
reference is every name in ``bourse.sdk.__all__`` with its signature (annotations as the
source writes them) and docstring. A test regenerates both and compares, so they cannot drift.
"""

from __future__ import annotations

import enum
import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

WIDTH = 100
DOCS = Path(__file__).resolve().parents[3] / "docs" / "reference"
NOTE = "Generated from the code by `python -m bourse.cli.reference`: do not edit by hand."


def commands() -> Iterator[tuple[str, click.Context]]:
    """Every command and subcommand (``jobs show``) with a context for its help."""
    from bourse.cli.main import cli

    root = click.Context(cli, info_name="bourse", terminal_width=WIDTH, max_content_width=WIDTH,
                         **cli.context_settings)
    yield "", root

    def walk(group: click.Group, parent: click.Context, prefix: str
             ) -> Iterator[tuple[str, click.Context]]:
        for name in group.list_commands(parent):
            command = group.get_command(parent, name)
            assert command is not None
            # click keeps the help option of the first context that asked for it: a test that
            # invoked the command alone (no `-h`) must not change what `bourse X -h` shows
            command._help_option = None
            ctx = click.Context(command, info_name=name, parent=parent)
            yield f"{prefix}{name}", ctx
            if isinstance(command, click.Group):
                yield from walk(command, ctx, f"{prefix}{name} ")

    yield from walk(cli, root, "")


def anchor(title: str) -> str:
    return title.lower().replace(" ", "-")


def cli_reference() -> str:
    found = list(commands())
    titles = [f"bourse {name}".strip() for name, _ in found]
    lines = ["# CLI reference", "", NOTE, "",
             *(f"- [`{t}`](#{anchor(t)})" for t in titles[1:]), ""]
    for title, (_, ctx) in zip(titles, found, strict=True):
        lines += [f"## {title}", "", "```text", ctx.get_help(), "```", ""]
    return "\n".join(lines)


class _Source:
    """An annotation shown as the source wrote it (``str | None``), not as its repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def signature(obj: Callable[..., Any]) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"

    def shown(annotation: Any) -> Any:
        return _Source(annotation) if isinstance(annotation, str) else annotation

    params = [p.replace(annotation=shown(p.annotation)) for p in sig.parameters.values()
              if p.name != "self"]
    return str(sig.replace(parameters=params,
                           return_annotation=shown(sig.return_annotation)))


def doc(obj: Any) -> list[str]:
    """Its own docstring (a subclass without one does not repeat its base's)."""
    text = obj.__doc__
    return [inspect.cleandoc(text), ""] if isinstance(text, str) and text.strip() else []


def members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties, the class's own first, then its bourse bases'."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("bourse."):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            if callable(value) or isinstance(value, property):
                seen.add(name)
                yield name, value


def describe_class(name: str, cls: type) -> list[str]:
    if issubclass(cls, enum.Enum):
        values = ", ".join(f"`{m.value}`" for m in cls)
        return [f"## {name}", "", f"An enumeration: {values}.", "", *doc(cls)]
    if issubclass(cls, BaseException):
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        return [f"## {name}", "", f"`class {name}({bases})`", "", *doc(cls)]
    lines = [f"## {name}", "", f"`{name}{signature(cls)}`", "", *doc(cls)]
    for member, value in members(cls):
        if isinstance(value, property):
            lines += [f"### {name}.{member}", "", "A property.", "", *doc(value)]
        else:
            lines += [f"### {name}.{member}", "", f"`{member}{signature(value)}`", "",
                      *doc(value)]
    return lines


def sdk_reference() -> str:
    from bourse import sdk

    lines = ["# SDK reference", "", NOTE, "", *doc(sdk),
             *(f"- [`{n}`](#{n.lower()})" for n in sdk.__all__), ""]
    for name in sdk.__all__:
        obj = getattr(sdk, name)
        if inspect.isclass(obj):
            lines += describe_class(name, obj)
        else:
            lines += [f"## {name}", "", f"`{name}{signature(obj)}`", "", *doc(obj)]
    return "\n".join(lines).rstrip() + "\n"


def references() -> dict[Path, str]:
    return {DOCS / "cli.md": cli_reference(), DOCS / "sdk.md": sdk_reference()}


def main(argv: list[str]) -> int:
    generated = references()
    stale = [p for p, text in generated.items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path} differs from the code: run python -m bourse.cli.reference",
                  file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated[path], encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
