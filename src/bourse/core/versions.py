"""Dotted version numbers (drivers, CUDA, torch): compared as integers, printed as written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bourse.core.errors import InvalidInput

_VERSION = re.compile(r"^\d+(?:\.\d+)*$")


@dataclass(frozen=True, order=True, slots=True)
class Version:
    """``Version.parse("515.43.04")`` compares as (515, 43, 4) and prints as ``515.43.04``."""

    parts: tuple[int, ...]
    text: str = field(compare=False, default="")

    @classmethod
    def parse(cls, text: str, *, field: str = "version") -> Version:
        """A local suffix such as ``+cu118`` is ignored."""
        core = str(text).strip().split("+", 1)[0]
        if not _VERSION.match(core):
            raise InvalidInput(f"cannot read version {text!r}", field=field,
                               hint="write e.g. 12.1 or 535.104.05")
        return cls(tuple(int(part) for part in core.split(".")), core)

    def __str__(self) -> str:
        return self.text or ".".join(str(p) for p in self.parts)

    @property
    def major(self) -> int:
        return self.parts[0]

    def major_minor(self) -> Version:
        parts = (*self.parts, 0)[:2]
        return Version(parts, ".".join(str(p) for p in parts))

    def cuda_tag(self) -> str:
        """CUDA (11, 8) -> ``"cu118"``, the name PyTorch gives that build."""
        minor = self.parts[1] if len(self.parts) > 1 else 0
        return f"cu{self.parts[0]}{minor}"


def parse_version(text: str, *, field: str = "version") -> Version:
    return Version.parse(text, field=field)
