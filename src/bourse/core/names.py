"""The grammars of the names a ``Compute`` lists: region and provider globs, compliance tags,
package requirements, a container image.

Each entry is checked where it is written, so that what could never match (a ``[`` that opens
no class, a tag no node can carry) or could reach a node's command line as an option
(``--privileged`` as an image, ``--index-url`` as a package) is refused with its field.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from bourse.core.errors import InvalidInput

MAX_ENTRIES = 64  # entries of each list (regions, providers, tags, packages)
MAX_NAME_LENGTH = 256
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,31}$")  # as nodes' and projects' tags
# an image reference as docker and podman read one; never an option (``--privileged``)
IMAGE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$")


def entries(value: Any, field: str) -> tuple[str, ...]:
    """The entries of a list field (a list, or one comma-separated string), distinct, each
    in its field's grammar."""
    if value is None:
        return ()
    if not isinstance(value, str | list | tuple | set | frozenset):
        raise InvalidInput(f"expected a list of names or globs, got {value!r:.80}",
                           field=field)
    items = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(i, str) for i in items):
        raise InvalidInput(f"expected names or globs, got {value!r:.80}", field=field)
    found = tuple(dict.fromkeys(i.strip() for i in items if i.strip()))
    if len(found) > MAX_ENTRIES:
        raise InvalidInput(f"{len(found)} entries; at most {MAX_ENTRIES}", field=field)
    for item in found:
        _check_item(item, field)
    return found


def _check_item(item: str, field: str) -> None:
    """One entry of a list field, in its field's grammar: what could never match (a ``[``
    that opens no class, a tag no node can carry) or reach a command line is refused."""
    if len(item) > MAX_NAME_LENGTH or any(ord(c) < 32 for c in item):
        raise InvalidInput(f"{item[:80]!r} is longer than {MAX_NAME_LENGTH} characters or "
                           "holds a control character", field=field)
    if field == "tags" and not TAG_PATTERN.match(item):
        raise InvalidInput(f"tag {item!r} is not a tag", field=field,
                           hint="tags are lower-case letters, digits, '.', '_' and '-', "
                                "at most 32")
    elif field == "packages":
        _check_requirement(item)
    elif field != "tags":
        _check_glob(item, field)


def _check_glob(pattern: str, field: str) -> None:
    """A glob as ``fnmatch`` reads it; a ``[`` that opens no class is refused, as fnmatch
    would take it for a literal ``[`` that no region or provider name holds."""
    if _unclosed_class(pattern):
        raise InvalidInput(f"{pattern!r}: '[' opens a class that is never closed",
                           field=field, hint="write a class as [abc] or [a-c] and a literal "
                                             "[ as [[]; e.g. us-east-*")


def _unclosed_class(pattern: str) -> bool:
    start = pattern.find("[")
    while start >= 0:
        body = start + 1 + (pattern[start + 1:start + 2] == "!")
        body += pattern[body:body + 1] == "]"  # a ] first in a class is one of its members
        end = pattern.find("]", body)
        if end < 0:
            return True
        start = pattern.find("[", end + 1)
    return False


def _check_requirement(text: str) -> None:
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0]
        raise InvalidInput(f"{text!r} is not a requirement specifier ({reason})",
                           field="packages", hint="write e.g. six==1.17.0 or 'numpy>=2'"
                           ) from None


def image(value: str) -> str:
    if not IMAGE_PATTERN.match(value):
        raise InvalidInput(f"{value[:80]!r} is not an image reference", field="image",
                           hint="write e.g. python:3.12-slim or ghcr.io/org/trainer:1.4")
    return value
