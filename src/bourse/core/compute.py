"""``Compute``: what a job needs, written as a user would write it.

``Compute("a100-40gb", disk="100GB", spot="prefer", max_price=0.5)`` or
``Compute(gpu="h100|a100-80gb:8", cpus="32+", cuda=">=12.1", torch="2.1")``.

Shorthand accepted by ``gpu``: a label (``a100``, ``A100-40GB``, ``NVIDIA A100-SXM4-40GB``),
alternatives (``h100|a100-80gb``), a count (``a100:8``), a per-GPU memory range instead of or as
well as labels (``24GB..80GB:2``, ``40GB+``), ``gpu`` (or ``any``) for any GPU, as Lightning's
``CloudCompute("gpu")``, ``cuda`` for any NVIDIA GPU, or ``cpu`` for no GPU. Sizes (cpus,
memory, disk, GPU memory) are minimums unless written as a range ``low..high``; GB means GiB.

Every number is bounded by what one node can have (``LIMITS``, ``MAX_GPUS``): a job runs on
one node, so ``gpu="a100:1000000000000"`` could only ever wait; it is refused where it is
written instead, naming the field and the bound.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bourse.core import names
from bourse.core.cuda import parse_cuda_floor, torch_release
from bourse.core.errors import InvalidInput
from bourse.core.gpus import GpuSelection, catalogue
from bourse.core.units import Range, parse_price, parse_range, parse_share, parse_size_gib

SpotPolicy = Literal["never", "prefer", "only"]
SPOT_POLICIES: tuple[str, ...] = ("never", "prefer", "only")

# More than any one node has (the largest machines of the shipped catalogues have 16 GPUs,
# 1,024 vCPUs and 6 TiB of memory), with room to grow: field -> (bound, unit).
MAX_GPUS = 64
LIMITS: dict[str, tuple[float, str]] = {
    "cpus": (4096, ""), "memory": (64 * 1024, "GB"), "disk": (1024 * 1024, "GB"),
    "gpu memory": (1024, "GB"),
}
MAX_NODES = 1024
ANY_GPU = ("gpu", "any")  # Lightning's CloudCompute("gpu"): one GPU, any model
ANY_NVIDIA = "cuda"
# Lightning's other machine names are machines of its own cloud; say what they were instead
LIGHTNING_MACHINES = {
    "default": 'Compute("cpu", cpus=1, memory="4GB")',
    "cpu-small": 'Compute("cpu", cpus=2, memory="8GB")',
    "cpu-medium": 'Compute("cpu", cpus=8, memory="32GB")',
    "gpu-fast": 'Compute("v100", cpus=8, memory="61GB")',
    "gpu-fast-multi": 'Compute("v100:4", cpus=32, memory="244GB")',
}
_COUNT = re.compile(r"^[0-9]{1,18}$")


class Bounds(BaseModel):
    """An inclusive range; ``max`` None means no upper bound."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    min: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    max: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> Bounds:
        if self.max is not None and self.max < self.min:
            raise InvalidInput(f"empty range {self.min:g}..{self.max:g}: the upper bound is "
                               "below the lower bound", hint="write low..high")
        return self

    def __contains__(self, value: float | None) -> bool:
        if value is None:
            return self.min <= 0 and self.max is None
        return value >= self.min and (self.max is None or value <= self.max)

    @property
    def unbounded(self) -> bool:
        return self.min <= 0 and self.max is None

    def describe(self, unit: str = "") -> str:
        return Range(self.min, self.max).describe(unit)

    def at_most(self, field: str) -> Bounds:
        """Itself, when neither end is above what a node can have (``LIMITS[field]``)."""
        limit, unit = LIMITS[field]
        high = self.min if self.max is None else max(self.min, self.max)
        if high > limit:
            ceiling = "; write low+ for no upper bound" if self.max is not None else ""
            raise InvalidInput(f"{_amount(high)}{unit} is more than any node has",
                               field=field.replace(" ", "_"),
                               hint=f"ask for at most {_amount(limit)}{unit}{ceiling}")
        return self

    @classmethod
    def parse(cls, value: Any, field: str, sizes: bool = True) -> Bounds:
        if isinstance(value, Bounds):
            return value
        if isinstance(value, dict):
            return cls.model_validate(value)
        parsed = parse_range(value, field=field, sizes=sizes)
        return cls(min=parsed.low, max=parsed.high)


def _amount(value: float) -> str:
    return f"{value:,.0f}" if value < 1e15 and value == int(value) else f"{value:g}"


class GpuSpec(BaseModel):
    """The GPU part of a Compute: acceptable models (empty = any), count, per-GPU memory."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    models: tuple[str, ...] = ()
    count: int = 1
    memory: Bounds = Bounds()
    requested: str = ""
    notes: tuple[str, ...] = ()

    @field_validator("count")
    @classmethod
    def _count(cls, value: int) -> int:
        if value < 1:
            raise ValueError("GPU count must be >= 1 (use gpu='cpu' for no GPU)")
        if value > MAX_GPUS:
            raise ValueError(f"GPU count {value} is more than any node has; ask for at most "
                             f"{MAX_GPUS}")
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: Bounds) -> Bounds:
        return value.at_most("gpu memory")

    @field_validator("models")
    @classmethod
    def _models(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        known = catalogue().models
        unknown = [m for m in value if m not in known]
        if unknown:
            raise ValueError(f"unknown GPU model ids {unknown}; use a label such as a100-40gb")
        return tuple(dict.fromkeys(value))

    def describe(self) -> str:
        text = self.requested or "|".join(self.models) or "any GPU"
        return text if ":" in text else f"{text}:{self.count}"


def parse_gpu(text: str) -> GpuSpec | None:
    """Parse the ``gpu`` shorthand; ``cpu`` or ``none`` mean no GPU."""
    raw = text.strip()
    if not raw:
        raise InvalidInput("gpu is empty", field="gpu",
                           hint="name a GPU (e.g. a100-40gb) or write gpu='cpu' for none")
    if raw.lower() in ("cpu", "none"):
        return None
    body, count = _split_count(raw)
    models: list[str] = []
    notes: list[str] = []
    memory = Bounds()
    terms = [t.strip() for t in body.split("|")]
    for term in terms:
        if not term:
            raise InvalidInput(f"empty alternative in {text!r}", field="gpu",
                               hint="write alternatives as h100|a100-80gb")
        if _is_memory(term):
            memory = Bounds.parse(term, "gpu").at_most("gpu memory")
        elif term.lower() not in ANY_GPU:
            selection = _resolve(term)
            models.extend(m for m in selection.ids if m not in models)
            notes.extend(_family_note(selection))
    if models and any(t.lower() in ANY_GPU for t in terms):
        raise InvalidInput(f"{text!r}: 'gpu' means any GPU, so naming others says nothing",
                           field="gpu", hint="write gpu alone, or only the GPUs you accept")
    return GpuSpec(models=tuple(models), count=count, memory=memory, requested=raw,
                   notes=tuple(notes))


def _resolve(term: str) -> GpuSelection:
    """A label as the catalogue reads it; ``cuda`` is every NVIDIA model, and a machine name
    of Lightning's cloud is refused with what it stood for."""
    word = term.lower()
    if word in LIGHTNING_MACHINES:
        raise InvalidInput(f"{term!r} is a machine of Lightning's cloud, not a GPU",
                           field="gpu", hint=f"say what it was: {LIGHTNING_MACHINES[word]}, "
                                             'or Compute("gpu") for any one GPU')
    if word != ANY_NVIDIA:
        return catalogue().resolve(term)
    nvidia = tuple(m for m in catalogue().models.values() if m.vendor == "nvidia")
    return GpuSelection(term, nvidia, family="NVIDIA GPU")


def _family_note(selection: GpuSelection) -> list[str]:
    if selection.label.lower() == ANY_NVIDIA:
        return [f"{selection.label!r} means any NVIDIA GPU ({len(selection.models)} models)"]
    if len(selection.models) > 1:
        return [f"{selection.label!r} means any {selection.family}: {', '.join(selection.ids)}"]
    return []


def _split_count(text: str) -> tuple[str, int]:
    body, sep, count = text.rpartition(":")
    if not sep:
        return text, 1
    if not _COUNT.match(count.strip()) or not 1 <= int(count) <= MAX_GPUS:
        raise InvalidInput(f"GPU count in {text!r} must be a whole number from 1 to "
                           f"{MAX_GPUS}", field="gpu",
                           hint="write e.g. a100:8; use gpu='cpu' for no GPU")
    return body, int(count)


def _is_memory(term: str) -> bool:
    probe = term.replace("..", " ").removesuffix("+").split()
    try:
        for part in probe:
            parse_size_gib(part, field="gpu memory")
    except InvalidInput:
        return False
    return bool(probe) and not term.strip().isdigit()


class Compute(BaseModel):
    """A job's requirements. Positional shorthand: ``Compute("a100:8", cpus="32+")``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: GpuSpec | None = None
    cpus: Bounds = Bounds()
    memory: Bounds = Bounds()
    disk: Bounds = Bounds()
    cuda: str | None = None
    torch: str | None = None
    packages: tuple[str, ...] = ()
    image: str | None = None
    spot: SpotPolicy = "never"
    max_price: float | None = None
    regions: tuple[str, ...] = ()
    exclude_regions: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    exclude_providers: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    num_nodes: int = 1
    # the least measured reliability score (core.reliability) a node must have: 0.99 or "99%"
    min_reliability: float | None = None

    def __init__(self, gpu: Any = None, /, **data: Any) -> None:
        if gpu is not None:
            if "gpu" in data:
                raise InvalidInput("gpu given twice", field="gpu")
            data["gpu"] = gpu
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _first_error(exc) from None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "nodes" in data:  # Compute(..., nodes=N), as dstack writes it
            if "num_nodes" in data:
                raise InvalidInput("nodes and num_nodes both given", field="nodes",
                                   hint="write one of them")
            data["num_nodes"] = data.pop("nodes")
        gpu = data.get("gpu")
        if isinstance(gpu, str):
            data["gpu"] = parse_gpu(gpu)
        _merge_gpu_kwargs(data)
        return data

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus(cls, value: Any) -> Bounds:
        return Bounds.parse(value, "cpus", sizes=False).at_most("cpus")

    @field_validator("memory", "disk", mode="before")
    @classmethod
    def _sizes(cls, value: Any, info: Any) -> Bounds:
        return Bounds.parse(value, info.field_name).at_most(info.field_name)

    @field_validator("cuda", mode="before")
    @classmethod
    def _cuda(cls, value: Any) -> str | None:
        return None if value is None else str(parse_cuda_floor(str(value)))

    @field_validator("torch", mode="before")
    @classmethod
    def _torch(cls, value: Any) -> str | None:
        if value is None:
            return None
        torch_release(str(value))
        return str(value).strip()

    @field_validator("spot", mode="before")
    @classmethod
    def _spot(cls, value: Any) -> str:
        if isinstance(value, bool):
            return "only" if value else "never"
        text = str(value).strip().lower()
        if text not in SPOT_POLICIES:
            raise InvalidInput(f"spot must be one of never, prefer, only; got {value!r}",
                               field="spot")
        return text

    @field_validator("max_price", mode="before")
    @classmethod
    def _price(cls, value: Any) -> float | None:
        return None if value is None else parse_price(value)

    @field_validator("min_reliability", mode="before")
    @classmethod
    def _reliability(cls, value: Any) -> float | None:
        return None if value is None else parse_share(value)

    @field_validator("regions", "exclude_regions", "providers", "exclude_providers", "tags",
                     "packages", mode="before")
    @classmethod
    def _lists(cls, value: Any, info: Any) -> tuple[str, ...]:
        return names.entries(value, info.field_name)

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return None if value is None else names.image(value)

    @field_validator("num_nodes", mode="before")
    @classmethod
    def _nodes(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NODES:
            raise InvalidInput(f"num_nodes must be a whole number from 1 to {MAX_NODES}, "
                               f"got {value!r:.40}",
                               field="num_nodes")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Compute:
        if self.cuda and self.gpu is None:
            raise InvalidInput("a CUDA floor needs a GPU", field="cuda",
                               hint="add gpu=... or drop cuda")
        if self.gpu and self.gpu.models and self.cuda and all(
            catalogue().get(m).vendor != "nvidia" for m in self.gpu.models
        ):
            raise InvalidInput(f"{', '.join(self.gpu.models)} cannot run CUDA", field="cuda")
        if self.image and self.packages:
            raise InvalidInput("packages cannot be installed into an image", field="packages",
                               hint="install them in the image, or drop image to run in a "
                                    "virtualenv on the node")
        _no_overlap(self.regions, self.exclude_regions, "regions")
        _no_overlap(self.providers, self.exclude_providers, "providers")
        return self

    def describe(self) -> str:
        """A one-line summary, e.g. ``a100:1, cpus 8+, spot=prefer, <= $0.50/h``."""
        parts = [self.gpu.describe() if self.gpu else "no GPU"]
        for name, bounds, unit in (("cpus", self.cpus, ""), ("memory", self.memory, "GB"),
                                   ("disk", self.disk, "GB")):
            if not bounds.unbounded:
                parts.append(f"{name} {bounds.describe(unit)}")
        parts += [f"{k}={v}" for k, v in (("cuda", self.cuda), ("torch", self.torch),
                                          ("image", self.image)) if v]
        if self.spot != "never":
            parts.append(f"spot={self.spot}")
        if self.max_price is not None:
            parts.append(f"<= ${self.max_price:.2f}/h")
        if self.min_reliability is not None:
            parts.append(f"reliability >= {self.min_reliability:.1%}")
        if self.num_nodes > 1:
            return f"{self.num_nodes} nodes, each {', '.join(parts)}"
        return ", ".join(parts)


def _merge_gpu_kwargs(data: dict[str, Any]) -> None:
    """``gpus=N`` and ``gpu_memory="40GB+"`` refine (or create) the GPU spec."""
    count, memory = data.pop("gpus", None), data.pop("gpu_memory", None)
    if count is None and memory is None:
        return
    gpu = data.get("gpu")
    spec = gpu if isinstance(gpu, GpuSpec) else GpuSpec.model_validate(gpu or {})
    update: dict[str, Any] = {}
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_GPUS:
            raise InvalidInput(f"gpus must be a whole number from 1 to {MAX_GPUS}, got "
                               f"{count!r:.40}", field="gpus")
        update["count"] = count
    if memory is not None:
        update["memory"] = Bounds.parse(memory, "gpu_memory").at_most("gpu memory")
    data["gpu"] = spec.model_copy(update=update)


def _no_overlap(allow: tuple[str, ...], deny: tuple[str, ...], field: str) -> None:
    clash = [a for a in allow if any(fnmatch.fnmatchcase(a, d) for d in deny)]
    if clash:
        raise InvalidInput(f"{', '.join(clash)} is both required and excluded", field=field,
                           hint=f"drop it from {field} or from exclude_{field}")


def _first_error(exc: ValidationError) -> InvalidInput:
    """pydantic's error, reworded with the field path, as an :class:`InvalidInput`."""
    error = exc.errors()[0]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, InvalidInput):
        if cause.field is None and error["loc"]:
            cause.field = ".".join(str(p) for p in error["loc"])
        return cause
    field = ".".join(str(p) for p in error["loc"]) or None
    return InvalidInput(error["msg"].removeprefix("Value error, "), field=field)
