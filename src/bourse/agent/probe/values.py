"""Reading nvidia-smi's values: the words it uses for "no value", units, yes/no and modes.

Every source (XML, ``-q`` text, CSV, the table) spells absence differently ("N/A", "[N/A]",
"Not Supported", "[Requested functionality has been deprecated]", "Unknown Error"). All of them
become None here, so that no parser ever turns a placeholder into a number or a crash. R610
drivers append a note to values they deprecate ("610.57.04 [Deprecated; will be removed in CUDA
14.0. Use KMD Version instead]"): the note is dropped, the value kept.
"""

from __future__ import annotations

import math
import re

from bourse.core.cuda import max_cuda
from bourse.core.errors import InvalidInput, UnknownGpu
from bourse.core.gpus import catalogue
from bourse.core.versions import parse_version

_ABSENT = re.compile(
    r"^\[?(n/?a|not supported|not available|unknown error|unknown|none|"
    r"requested functionality has been deprecated|insufficient permissions|"
    r"gpu requires reset|gpu is lost)\]?$",
    re.IGNORECASE,
)
_NOTE = re.compile(r"\s+\[[^\[\]]*\]$")  # a trailing "[...]" after a value, not "[N/A]" alone
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?")
_TRUE = frozenset({"yes", "enabled", "on", "active", "true", "1"})
_FALSE = frozenset({"no", "disabled", "off", "not active", "false", "0"})


def clean(text: str | None) -> str | None:
    """The value, stripped; None for empty text and every "no value" spelling."""
    if text is None:
        return None
    value = _NOTE.sub("", text.strip())
    return None if not value or _ABSENT.match(value) else value


def number(text: str | None) -> float | None:
    """The leading number of ``"23028 MiB"``, ``"300.00 W"``, ``"16x"``; None if there is none."""
    value = clean(text)
    match = _NUMBER.match(value) if value else None
    found = float(match.group(0)) if match else None
    return found if found is not None and math.isfinite(found) else None  # "9"*400 is inf


def integer(text: str | None) -> int | None:
    value = number(text)
    return None if value is None else int(value)


def flag(text: str | None) -> bool | None:
    """Yes/No, Enabled/Disabled, On/Off, Active/Not Active -> bool; anything else None."""
    value = clean(text)
    if value is None:
        return None
    word = value.lower()
    return True if word in _TRUE else False if word in _FALSE else None


def total(*counts: int | None) -> int | None:
    """The sum of the counters that were reported; None when none was."""
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def model_of(name: str, memory_mib: int | None) -> str | None:
    """The catalogue id for a GPU name (and memory); None for a name the catalogue lacks."""
    if name.endswith("..."):
        return _truncated_model(name.removesuffix("...").strip(), memory_mib)
    try:
        return catalogue().identify(name, memory_mib).id
    except (UnknownGpu, InvalidInput):
        return None


def _truncated_model(prefix: str, memory_mib: int | None) -> str | None:
    """The table cuts long names ("NVIDIA GeForce RTX 2080 ..."): the one catalogue model whose
    nvidia-smi name starts with the prefix, is longer than it and whose memory matches, if
    exactly one does. A name that fits is printed whole, so the prefix itself is never the
    name: "NVIDIA GeForce RTX 2080 ..." is a 2080 SUPER or Ti, never a 2080."""
    key = prefix.lower()
    models = {m for m in catalogue().models.values()
              for n in m.names if n.lower().startswith(key) and len(n) > len(prefix)}
    if memory_mib is not None:
        models = {m for m in models if m.memory_matches(memory_mib)}
    return next(iter(models)).id if len(models) == 1 else None


def compute_capability(model: str | None) -> str | None:
    """The catalogue's compute capability for a model id, as "8.6"."""
    if model is None:
        return None
    cc = catalogue().get(model).compute_capability
    return f"{cc[0]}.{cc[1]}" if cc else None


def driver_cuda(driver: str | None) -> str | None:
    """The newest CUDA a driver supports, from NVIDIA's table (when nvidia-smi did not say)."""
    if driver is None:
        return None
    try:
        newest = max_cuda(parse_version(driver, field="driver"))
    except InvalidInput:
        return None
    return str(newest) if newest else None
