"""The GPU catalogue and label normalisation.

Users, clouds and ``nvidia-smi`` all name GPUs differently: ``a100``, ``A100-40GB``,
``NVIDIA A100-SXM4-40GB``, ``Tesla V100-SXM2-16GB``, ``rtx4090``. Everything here turns such a
label into canonical model ids from ``bourse/data/gpus.csv``. A bare family (``a100``) means any
size of it; an unknown label is an error naming the closest known labels — a wrong label must
never silently match nothing.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from bourse.core.data import read_rows
from bourse.core.errors import InvalidInput, UnknownGpu

# Words that never change which GPU a user means: vendor and product-line words, form factors
# and memory technologies. "super", "ti", "nvl", "ada" do change it and are kept. Vendor words
# are dropped even from the strict key; form factors only from the loose one, so that a
# catalogue's "H100-SXM" still names the 80 GB SXM part when no memory is given.
_VENDOR = frozenset({"nvidia", "tesla", "geforce", "quadro", "amd", "radeon", "instinct"})
_NOISE = _VENDOR | frozenset({
    "sxm", "sxm2", "sxm3", "sxm4", "sxm5", "sxm6", "pcie", "fhhl",
    "hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "generation", "gen",
})
_TOKEN = re.compile(r"[a-z0-9.]+")
_COUNT = re.compile(r"^[0-9]{1,18}$")  # ASCII digits: "²".isdigit() holds, int("²") fails
_MEMORY_TOKEN = re.compile(r"^(\d+(?:\.\d+)?)(?:gb|g|gib)$")
MEMORY_TOLERANCE = 0.075  # readings vary a few percent with driver and ECC (P4: 7611 of 8192)


@dataclass(frozen=True, slots=True)
class GpuModel:
    id: str
    family: str
    vendor: str
    memory_gb: int
    memory_mib: int
    compute_capability: tuple[int, int] | None
    architecture: str
    names: tuple[str, ...]
    aliases: tuple[str, ...]

    def memory_matches(self, mib: float) -> bool:
        return abs(mib - self.memory_mib) <= self.memory_mib * MEMORY_TOLERANCE


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """What a label resolved to: one model, or every model of a family."""

    label: str
    models: tuple[GpuModel, ...]
    family: str | None = None
    count: int | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.models)

    def describe(self) -> str:
        if self.family and len(self.models) > 1:
            return f"{self.family} (any of {', '.join(self.ids)})"
        return self.models[0].id


def label_key(label: str) -> str:
    """The loose comparison key of a label: case, separators and noise words removed."""
    return "".join(t for t in _tokens(label) if t not in _NOISE)


def strict_key(label: str) -> str:
    """The strict comparison key: case, separators and vendor words removed
    (``NVIDIA H100-SXM`` -> h100sxm)."""
    return "".join(t for t in _tokens(label) if t not in _VENDOR)


def _tokens(label: str) -> list[str]:
    return _TOKEN.findall(label.lower().replace("_", " ").replace("-", " "))


def _capability(text: str) -> tuple[int, int] | None:
    if not text:
        return None
    major, minor = text.split(".")
    return int(major), int(minor)


def _model(row: Mapping[str, str]) -> GpuModel:
    return GpuModel(
        id=row["id"], family=row["family"], vendor=row["vendor"],
        memory_gb=int(row["memory_gb"]), memory_mib=int(row["typical_memory_mib"]),
        compute_capability=_capability(row["compute_capability"]),
        architecture=row["architecture"],
        names=tuple(n for n in row["nvidia_smi_names"].split("|") if n),
        aliases=tuple(a for a in row["aliases"].split("|") if a),
    )


class GpuCatalogue:
    """Known GPU models and the lookups that normalise labels to them."""

    def __init__(self, models: Iterable[GpuModel]) -> None:
        self.models: dict[str, GpuModel] = {m.id: m for m in models}
        self.families: dict[str, tuple[GpuModel, ...]] = {}
        for model in self.models.values():
            self.families[model.family] = (*self.families.get(model.family, ()), model)
        self._strict = self._keys(strict_key)
        self._exact = self._keys(label_key)
        self._family_keys = {label_key(f): f for f in self.families}

    def _keys(self, key_of: Callable[[str], str]) -> dict[str, GpuModel]:
        keys: dict[str, GpuModel] = {}
        for model in self.models.values():
            for spelling in (model.id, *model.names, *model.aliases):
                other = keys.setdefault(key_of(spelling), model)
                if other is not model:
                    raise ValueError(
                        f"GPU table: {spelling!r} names both {other.id} and {model.id}")
        return keys

    def _lookup(self, text: str) -> GpuModel | None:
        return (
            self._strict.get(strict_key(text))
            or self._exact.get(label_key(text))
            or self._by_memory_hint(text)
        )

    def get(self, model_id: str) -> GpuModel:
        return self.models[model_id]

    def resolve(self, label: str) -> GpuSelection:
        """Resolve a label a user wrote (``a100``, ``A100-40GB``, ``a100:2``...).

        A label that, without vendor words and form factors, names a family of several sizes
        means any of them (``Tesla V100``, ``A100 PCIe``, ``H100-SXM``); otherwise it must name
        one model, by id, ``nvidia-smi`` name, alias, or family plus memory (``a100 40gb``).
        """
        text, count = _split_count(label)
        family = self._family_keys.get(label_key(text))
        if family is not None and len(self.families[family]) > 1:
            return GpuSelection(label, self.families[family], family, count)
        model = self._lookup(text)
        if model is None:
            raise UnknownGpu(label, self.suggest(text))
        return GpuSelection(label, (model,), model.family, count)

    def identify(self, name: str, memory_mib: float | None = None) -> GpuModel:
        """Identify a GPU from a name a machine or cloud reported, using its memory if known.

        The memory (per GPU, MiB) snaps to the family member within the tolerance, so a cloud
        catalogue's "A100" with 81920 MiB is an a100-80gb and "H100" with 96256 MiB an h100-nvl.
        """
        text, _ = _split_count(name)
        model = self._lookup(text)
        family = model.family if model else self._family_keys.get(label_key(text))
        if family is None:
            raise UnknownGpu(name, self.suggest(text))
        if memory_mib is not None and (model is None or not model.memory_matches(memory_mib)):
            snapped = self.snap(family, memory_mib)
            model = snapped or model
        if model is None:
            model = min(self.families[family], key=lambda m: m.memory_mib)
        return model

    def snap(self, family: str, memory_mib: float) -> GpuModel | None:
        """The member of ``family`` whose typical memory is within the tolerance, if any."""
        near = [m for m in self.families[family] if m.memory_matches(memory_mib)]
        return min(near, key=lambda m: abs(m.memory_mib - memory_mib)) if near else None

    def _by_memory_hint(self, text: str) -> GpuModel | None:
        """``a100 40gb pcie`` -> family ``a100`` snapped to 40 GiB, for unlisted spellings."""
        tokens = [t for t in _tokens(text) if t not in _NOISE]
        memory = [float(m.group(1)) for t in tokens if (m := _MEMORY_TOKEN.match(t))]
        rest = "".join(t for t in tokens if not _MEMORY_TOKEN.match(t))
        family = self._family_keys.get(rest) or (
            self._exact[rest].family if rest in self._exact else None
        )
        if family is None or len(memory) != 1:
            return None
        return self.snap(family, memory[0] * 1024)

    def suggest(self, text: str, limit: int = 3) -> list[str]:
        """Known labels closest to ``text``, for "did you mean" hints."""
        spellings = {label_key(m.id): m.id for m in self.models.values()}
        spellings.update(self._family_keys)
        key = label_key(text)
        scored = sorted(
            ((difflib.SequenceMatcher(None, key, k).ratio(), k) for k in spellings), reverse=True
        )
        best = scored[0][0] if scored else 0.0
        close = [k for ratio, k in scored if ratio >= max(0.6, best - 0.1)][:limit]
        return list(dict.fromkeys(spellings[k] for k in close))

    def all_labels(self) -> list[str]:
        return sorted({*self.models, *self.families})


def _split_count(label: str) -> tuple[str, int | None]:
    if not isinstance(label, str) or not label.strip():
        raise InvalidInput("a GPU label must be a non-empty string", field="gpu",
                           hint="write e.g. a100-40gb or h100:8")
    text, sep, count_text = label.strip().rpartition(":")
    if not sep:
        return label.strip(), None
    if not _COUNT.match(count_text.strip()) or int(count_text) < 1:
        raise InvalidInput(f"GPU count in {label!r} must be a whole number >= 1", field="gpu",
                           hint="write e.g. a100:8")
    return text.strip(), int(count_text)


@cache
def catalogue() -> GpuCatalogue:
    """The catalogue shipped with bourse (``bourse/data/gpus.csv``)."""
    return GpuCatalogue(_model(row) for row in read_rows("gpus.csv"))
