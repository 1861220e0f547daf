"""``resources``: what each node of a job needs, as a task file writes it.

The fields are :class:`~bourse.core.compute.Compute`'s, under the names and shorthand Compute
reads; a ``Resources`` is checked by building its Compute, so a task file can never hold a
requirement a job could not have.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from bourse.core.compute import Compute

# what a person writes for an amount: 8, 8.5, "8+", "32GB..64GB"
Amount = StrictStr | StrictInt | StrictFloat
Names = StrictStr | list[StrictStr]  # one name (or "a,b"), or a list of them
# a release as text; a number is read as written (task files keep `torch: 2.10` as "2.10")
Version = StrictStr | StrictInt | StrictFloat


class Strict(BaseModel):
    """Unknown fields are refused (a typo is an error, never ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Resources(Strict):
    """What each node of the job needs: ``Compute``'s fields as written. ``region`` and
    ``zone`` add to ``regions`` (globs that match a region or a zone); ``nodes`` is
    ``num_nodes``."""

    gpu: StrictStr | None = Field(default=None, description=(
        "GPU label, alternatives or count: a100, a100-40gb, h100|a100-80gb, a100:8, "
        "40GB+; gpu (or any) for any GPU, cuda for any NVIDIA GPU, cpu for none"))
    gpus: StrictInt | None = Field(default=None, description="number of GPUs, 1 to 64")
    gpu_memory: Amount | None = Field(default=None, description="per-GPU memory: 40GB+")
    cpus: Amount | None = Field(default=None, description="vCPUs: 8 (at least 8), 8..32")
    memory: Amount | None = Field(default=None, description="host memory: 32GB, 64GB+")
    disk: Amount | None = Field(default=None, description="disk: 100GB+")
    cuda: Version | None = Field(default=None, description="CUDA floor, e.g. '>=12.1'")
    torch: Version | None = Field(default=None, description="PyTorch release, e.g. '2.4'")
    packages: Names | None = Field(default=None, description=(
        "requirements the job's virtualenv holds (built once per node and cached)"))
    image: StrictStr | None = Field(default=None, description="a container image to run in")
    spot: StrictBool | Literal["never", "prefer", "only"] | None = None
    max_price: StrictStr | StrictInt | StrictFloat | None = Field(
        default=None, description="ceiling in US dollars per hour, e.g. 2 or $0.50/h")
    min_reliability: StrictStr | StrictInt | StrictFloat | None = Field(
        default=None, description="least measured reliability score of a node: 0.99 or 99%")
    region: Names | None = Field(default=None, description="allowed region(s), globs")
    zone: Names | None = Field(default=None, description="allowed zone(s), globs")
    regions: Names | None = None
    exclude_regions: Names | None = None
    providers: Names | None = None
    exclude_providers: Names | None = None
    tags: Names | None = Field(default=None, description="required compliance tags")
    nodes: StrictInt | None = Field(default=None, description="nodes that run it together")
    num_nodes: StrictInt | None = None

    @field_validator("cuda", "torch")
    @classmethod
    def _as_text(cls, value: str | float | None) -> str | None:
        return None if value is None else str(value)

    @model_validator(mode="after")
    def _is_a_compute(self) -> Resources:
        self.compute()
        return self

    def arguments(self) -> dict[str, Any]:
        """Compute's keyword arguments for what is written (``region``/``zone`` merged
        into ``regions``)."""
        written = self.model_dump(exclude_none=True)
        places = [name for key in ("regions", "region", "zone")
                  for name in _listed(written.pop(key, None))]
        if places:
            written["regions"] = places
        return written

    def compute(self) -> Compute:
        return Compute(**self.arguments())


def _listed(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return value.split(",") if isinstance(value, str) else list(value)


