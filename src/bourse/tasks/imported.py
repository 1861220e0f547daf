"""What the importers share: a `Translation` (the bourse-format mapping, what was refused, what
was translated with a difference worth saying) and the conversions both formats need.

An importer never drops a field silently: each field it reads is translated, translated with a
note (a hint with no bourse meaning, or a meaning bourse narrows), or refused by name with the
reason and what to write instead. A translation with refusals is not run (`detect.translate`).
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bourse.core.errors import InvalidInput
from bourse.core.gpus import catalogue
from bourse.market.catalogs import PROVIDERS
from bourse.storage.jobenv import input_var

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*(\+?)\s*$")
_SIZE_UNITS = {"": "GB", "g": "GB", "gb": "GB", "gib": "GB", "m": "MB", "mb": "MB",
               "mib": "MB", "t": "TB", "tb": "TB", "tib": "TB"}
_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(\+?)\s*$")
_DATA_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass(frozen=True, slots=True)
class Refusal:
    """A field bourse will not run as written: ``field`` is its path in the source file
    (``resources.image_id``, ``file_mounts./data``)."""

    field: str
    reason: str
    instead: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason} — {self.instead}"


@dataclass(slots=True)
class Translation:
    """A source file turned into a bourse-format mapping (``compat`` set), with refusals and
    notes collected on the way."""

    kind: str
    mapping: dict[str, Any] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)  # input name -> the field it is

    def refuse(self, where: str, reason: str, instead: str) -> None:
        self.refusals.append(Refusal(where, reason, instead))

    def note(self, where: str, text: str) -> None:
        self.notes.append(f"{where}: {text}")

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.mapping.setdefault("resources", {})
        return resources

    def setup_first(self, lines: Iterable[str]) -> None:
        """Put ``lines`` before the setup script (links the job needs before it runs)."""
        lines = list(lines)
        if lines:
            rest = self.mapping.get("setup")
            self.mapping["setup"] = "\n".join(lines) + ("\n" + rest if rest else "\n")


def unknown_field(t: Translation, where: str, name: str, known: Iterable[str], what: str) -> None:
    """Refuse a field the source format does not have, with the nearest one it does."""
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean {close[0]}?" if close else f"see {what}'s reference for its fields"
    t.refuse(where, f"not a field of {what}", hint)


def gpu_label(name: str, *, exact: bool) -> str:
    """A GPU name as the catalogue knows it. ``exact``: the name means one model (SkyPilot's
    ``A100`` is the 40 GB one, ``A100-80GB`` the other); otherwise a family name means any
    size of it (dstack's ``A100``). Raises `UnknownGpu` naming the closest known labels."""
    if exact:
        return catalogue().identify(name).id
    selection = catalogue().resolve(name)
    return selection.family if selection.family and len(selection.models) > 1 \
        else selection.models[0].id


def gpu_text(labels: list[str], count: int, memory: str | None = None) -> str:
    """The bourse ``gpu`` shorthand: ``h100|a100-80gb:8``, ``a100|24GB+:2``, ``gpu:1``."""
    terms = list(dict.fromkeys(labels)) + ([memory] if memory else [])
    return f"{'|'.join(terms) or 'gpu'}:{count}"


def whole_count(value: Any, where: str, t: Translation) -> int | None:
    """A GPU count: a whole number from 1, or a refusal."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1 \
            or value != int(value):
        t.refuse(where, f"GPU count {value!r} is not a whole number of GPUs",
                 "bourse gives whole GPUs: write a count of 1 or more")
        return None
    return int(value)


def size(value: Any, where: str, t: Translation, *, unit: str = "GB") -> tuple[str, bool] | None:
    """A size as bourse writes it (``64GB``) and whether it was a minimum (``+``); a bare
    number is in ``unit``."""
    match = _SIZE.match(str(value)) if isinstance(value, int | float | str) \
        and not isinstance(value, bool) else None
    if match is None or match.group(2).lower() not in _SIZE_UNITS:
        t.refuse(where, f"cannot read size {value!r}",
                 "write a number of GB, or a number and MB, GB or TB")
        return None
    number, written, plus = match.groups()
    return f"{number}{_SIZE_UNITS[written.lower()] if written else unit}", bool(plus)


def count(value: Any, where: str, t: Translation) -> tuple[str, bool] | None:
    """A vCPU count (``4``, ``4+``, ``0.5``) and whether it was a minimum."""
    match = _COUNT.match(str(value)) if isinstance(value, int | float | str) \
        and not isinstance(value, bool) else None
    if match is None:
        t.refuse(where, f"cannot read a count of vCPUs from {value!r}", "write e.g. 4 or 4+")
        return None
    return match.group(1), bool(match.group(2))


def at_least(t: Translation, where: str, text: str, was_minimum: bool, source: str) -> str:
    """``text`` as a bourse minimum; an exact value of the source format is widened, said."""
    if not was_minimum:
        t.note(where, f"{source} reads {text} as exactly {text}; bourse asks for at least "
                      f"{text} (write {text}..{text} in a bourse task for exactly)")
    return f"{text}+"


def provider(name: str, where: str, t: Translation, aliases: Mapping[str, str]) -> str | None:
    """A cloud name of the source format as a bourse provider, or a refusal."""
    text = aliases.get(name.lower(), name.lower())
    if text in PROVIDERS:
        return text
    t.refuse(where, f"bourse has no offers from {name!r}",
             f"drop it, or name one of {', '.join(PROVIDERS)}")
    return None


def data_name(path: str, taken: Iterable[str]) -> str:
    """An input name for a mount path (``/datasets-s3`` -> ``datasets-s3``), unique."""
    base = _DATA_NAME.sub("_", path.strip("/~.").rsplit("/", 1)[-1]).strip("_-") or "data"
    base = base if base[0].isalpha() else f"d{base}"
    name, n, used = base[:60], 1, set(taken)
    while name in used:
        n += 1
        name = f"{base[:56]}-{n}"
    return name


def link_line(name: str, path: str) -> str:
    """A setup line that shows input ``name`` at ``path`` (relative to the job's directory)."""
    parent = path.rstrip("/").rsplit("/", 1)[0] if "/" in path.rstrip("/") else ""
    target = shlex.quote(path.rstrip("/"))
    made = f"mkdir -p {shlex.quote(parent)} && " if parent else ""
    return f'{made}ln -sfn "${input_var(name)}" {target}'


def relative_path(path: str) -> bool:
    return not path.startswith(("/", "~", "$"))


def interpolate(text: str, env: Mapping[str, str | None]) -> str | None:
    """``$VAR`` / ``${VAR}`` replaced from ``env``; None when one has no value there."""
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        found = env.get(match.group(1) or match.group(2))
        if found is None:
            missing = True
            return ""
        return found

    done = _VARIABLE.sub(value, text)
    return None if missing else done


def refusal_error(t: Translation, source: str) -> InvalidInput:
    """One error listing every refused field."""
    lines = "\n".join(f"  {r}" for r in t.refusals)
    return InvalidInput(f"{source}: {len(t.refusals)} field(s) of this {t.kind} file cannot "
                        f"run on bourse:\n{lines}",
                        field=t.refusals[0].field if len(t.refusals) == 1 else None,
                        hint="change or remove them, or write a bourse task file "
                             "(docs/tasks-import.md says what maps to what)")
