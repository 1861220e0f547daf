"""A dstack configuration's ``resources`` as bourse ``resources``.

dstack's ``ResourcesSpec`` (``core/models/resources.py``): ``cpu`` (``16``, ``16..``,
``x86:16``, a ``{min, max}`` mapping), ``memory``, ``disk`` and ``shm_size`` sizes, and ``gpu``
written as ``:``-separated tokens in any order: vendor, names (``A10G,A100``), memory
(``24GB..80GB``) and count (``2``, ``1..8``). dstack reads a bare value as exactly that value and
a GPU name as any size of that GPU (``A100:80GB`` is the 80 GB one); bourse asks for minimums and
exact GPU counts, so an exact size becomes a minimum and a count range its lower end, each said
in a note.
"""

from __future__ import annotations

from typing import Any

from bourse.core.errors import InvalidInput
from bourse.core.gpus import catalogue
from bourse.tasks import imported
from bourse.tasks.imported import Translation

WHERE = "resources"
SOURCE = "dstack"
VENDORS = {"nvidia": "cuda", "amd": "amd"}
OTHER_VENDORS = ("google", "tpu", "intel", "tenstorrent", "tt")


def translate(resources: Any, t: Translation) -> None:
    if resources is None:
        return
    if not isinstance(resources, dict):
        t.refuse(WHERE, "must be a mapping", "write resources: {gpu: 24GB, ...}")
        return
    for key, value in resources.items():
        where = f"{WHERE}.{key}"
        if key == "cpu":
            _cpu(value, where, t)
        elif key in ("memory", "disk"):
            _size(key, value, where, t)
        elif key == "gpu":
            _gpu(value, where, t)
        elif key == "shm_size":
            t.note(where, "ignored: a job runs with the node's /dev/shm (a container image "
                          "gets the engine's default)")
        else:
            imported.unknown_field(t, where, str(key), ["cpu", "memory", "disk", "gpu",
                                                        "shm_size"], "dstack's resources")


def _range(value: Any) -> tuple[str | None, str | None, bool]:
    """(low, high, exact) of ``8``, ``8..``, ``..64GB``, ``2..8``, ``{min, max}``."""
    if isinstance(value, dict):
        low, high = value.get("min"), value.get("max")
        return (None if low is None else str(low), None if high is None else str(high),
                low is not None and low == high)
    text = str(value).replace(" ", "")
    if ".." in text:
        low, _, high = text.partition("..")
        return low or None, high or None, False
    return text, text, True


def _bounds(low: str | None, high: str | None, exact: bool, where: str,
            t: Translation) -> str:
    if exact and low is not None:
        return imported.at_least(t, where, low, False, SOURCE)
    if high is None:
        return f"{low or 0}+"
    return f"{low or ''}..{high}"


def _cpu(value: Any, where: str, t: Translation) -> None:
    text = value if isinstance(value, dict) else str(value)
    if isinstance(text, str) and ":" in text:
        arch, _, text = text.partition(":")
        if arch.lower() not in ("x86", "x86_64", "amd64"):
            t.refuse(where, f"{arch} CPUs: bourse nodes are x86", "drop the architecture")
            return
    elif isinstance(text, str) and text.lower() in ("arm", "arm64", "aarch64"):
        t.refuse(where, f"{text} CPUs: bourse nodes are x86", "drop the architecture")
        return
    low, high, exact = _range(text)
    for part in (low, high):
        if part is not None and imported.count(part, where, t) is None:
            return
    t.resources["cpus"] = _bounds(low, high, exact, where, t)


def _size(key: str, value: Any, where: str, t: Translation) -> None:
    low, high, exact = _range(value)
    sized = [None if p is None else imported.size(p, where, t) for p in (low, high)]
    if any(p is not None and s is None for p, s in zip((low, high), sized, strict=True)):
        return
    low_text, high_text = (None if s is None else s[0] for s in sized)
    if key == "disk" and exact:  # the disk dstack provisions: a node with at least as much
        t.resources[key] = f"{low_text}+"
        return
    t.resources[key] = _bounds(low_text, high_text, exact, where, t)


def _gpu(value: Any, where: str, t: Translation) -> None:
    spec = _gpu_spec(value, where, t)
    if spec is None:
        return
    if spec.get("count_low") == 0:
        t.note(where, "dstack allows no GPU at all here; bourse asks for none")
        return
    labels = _gpu_labels(spec, where, t)
    if labels is None:
        return
    memory = spec.get("memory")
    count = _gpu_count(spec, where, t)
    if count is not None:
        t.resources["gpu"] = imported.gpu_text(labels, count, memory)


def _gpu_spec(value: Any, where: str, t: Translation) -> dict[str, Any] | None:
    """dstack's GPU shorthand (or mapping) as vendor, names, memory and count bounds."""
    if isinstance(value, dict):
        return _gpu_mapping(value, where, t)
    spec: dict[str, Any] = {}
    for token in str(value).replace(" ", "").split(":"):
        if not token:
            t.refuse(where, f"empty part in {value!r}", "write e.g. A100:80GB:2")
            return None
        if token.lower() in (*VENDORS, *OTHER_VENDORS):
            spec["vendor"] = token.lower()
        elif token[0].isalpha():
            spec["names"] = token.split(",")
        elif any(c.isalpha() for c in token):
            spec["memory"] = _gpu_memory(token, where, t)
            if spec["memory"] is None:
                return None
        elif not _put_count(spec, token, where, t):
            return None
    return spec


def _gpu_mapping(value: dict[str, Any], where: str, t: Translation) -> dict[str, Any] | None:
    extra = sorted(k for k in value if k not in ("vendor", "name", "count", "memory"))
    if extra:
        t.refuse(f"{where}.{extra[0]}", "bourse cannot ask for it (total GPU memory, compute "
                                        "capability)", "ask for per-GPU memory or a model")
        return None
    spec: dict[str, Any] = {}
    if "vendor" in value:
        spec["vendor"] = str(value["vendor"]).lower()
    if "name" in value:
        names = value["name"]
        spec["names"] = [str(n) for n in (names if isinstance(names, list) else [names])]
    if "memory" in value:
        spec["memory"] = _gpu_memory(value["memory"], where, t)
        if spec["memory"] is None:
            return None
    if "count" in value and not _put_count(spec, value["count"], where, t):
        return None
    return spec


def _gpu_memory(value: Any, where: str, t: Translation) -> str | None:
    low, high, exact = _range(value)
    sized = [None if p is None else imported.size(p, where, t) for p in (low, high)]
    if any(p is not None and s is None for p, s in zip((low, high), sized, strict=True)):
        return None
    low_text, high_text = (None if s is None else s[0] for s in sized)
    return _bounds(low_text, high_text, exact, where, t)


def _put_count(spec: dict[str, Any], value: Any, where: str, t: Translation) -> bool:
    low, high, _ = _range(value)
    try:
        spec["count_low"] = int(low) if low is not None else 1
        spec["count_high"] = int(high) if high is not None else None
    except ValueError:
        t.refuse(where, f"cannot read a GPU count from {value!r}", "write e.g. 2 or 1..8")
        return False
    return True


def _gpu_count(spec: dict[str, Any], where: str, t: Translation) -> int | None:
    low, high = spec.get("count_low", 1), spec.get("count_high", spec.get("count_low", 1))
    if low != high:
        t.note(where, f"dstack takes {low} to {high or 'any number of'} GPUs; bourse asks for "
                      f"exactly {low} (the fewest the range allows)")
    return imported.whole_count(low, where, t)


def _gpu_labels(spec: dict[str, Any], where: str, t: Translation) -> list[str] | None:
    vendor = spec.get("vendor")
    if vendor in OTHER_VENDORS:
        t.refuse(where, f"{vendor} accelerators: bourse has NVIDIA and AMD GPUs",
                 "ask for a GPU, e.g. gpu: 24GB")
        return None
    labels: list[str] = []
    for name in spec.get("names", []):
        try:
            labels.append(imported.gpu_label(name, exact=False))
        except InvalidInput as exc:
            t.refuse(where, f"{exc.message} (not in bourse's GPU catalogue)",
                     exc.hint or "run `bourse gpus` to list known GPUs")
            return None
    if not labels and vendor == "amd":
        labels = [m.id for m in catalogue().models.values() if m.vendor == "amd"]
    elif not labels and vendor == "nvidia":
        labels = ["cuda"]
    return labels
