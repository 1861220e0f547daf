"""Whether this interpreter provides the packages a stage needs, for a local run (on the
exchange, the node installs them into the job's environment instead)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement

from bourse.core.errors import InvalidInput


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def unmet(specs: Iterable[str],
          version_of: Callable[[str], str | None] = installed_version) -> list[str]:
    """The requirement specifiers among ``specs`` this interpreter does not satisfy, each
    with what it has instead (``numpy>=9 (found 2.1.0)``, ``tqdm (not installed)``)."""
    return [_phrase(*pair) for pair in _unmet(specs, version_of)]


def _phrase(spec: str, found: str) -> str:
    return f"{spec} ({found})"


def _unmet(specs: Iterable[str],
           version_of: Callable[[str], str | None]) -> list[tuple[str, str]]:
    found = []
    for spec in specs:
        try:
            req = Requirement(spec)
        except InvalidRequirement as exc:
            raise InvalidInput(f"requirement {spec!r} is not a pip requirement specifier: {exc}",
                               field="requirements", hint="write e.g. numpy>=1.26") from None
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = version_of(req.name)
        if version is None:
            found.append((spec, "not installed"))
        elif req.specifier and not req.specifier.contains(version, prereleases=True):
            found.append((spec, f"found {version}"))
    return found


def check_local(stage: str, specs: Iterable[str]) -> None:
    """Refuse a local run of ``stage`` before it starts when a package it needs is missing."""
    missing = _unmet(specs, installed_version)
    if missing:
        said = ", ".join(_phrase(*pair) for pair in missing)
        names = " ".join(f"'{spec}'" for spec, _ in missing)
        raise InvalidInput(f"stage {stage!r} needs packages this Python does not have: {said}",
                           field="requirements",
                           hint=f"pip install {names}, or run it on an exchange, whose nodes "
                                "install them")
