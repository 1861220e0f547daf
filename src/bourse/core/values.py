"""The base of value types that cross the wire (``protocol``) or the core's boundary."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Wire(BaseModel):
    """Base of every wire model: unknown fields are ignored, instances are immutable."""

    model_config = ConfigDict(extra="ignore", frozen=True)
