"""``Task``: a task file as it is written, checked field by field.

The models here describe what a person writes (``gpu: a100:8``, ``cpus: 8+``,
``pending_timeout: 10m``), so the JSON Schema made from them (``tasks.schema``) is the format
itself. ``resources`` accepts every field of :class:`~bourse.core.compute.Compute` under the
names and shorthand Compute reads, and is checked by building one: the format can never accept
a requirement a job could not have. The other fields reuse the job spec's own checks
(``protocol.common``: env names, ports, store URIs, data names; ``core.units``: durations).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from bourse.core.errors import InvalidInput
from bourse.core.units import parse_duration
from bourse.core.uri import parse_uri
from bourse.protocol.common import (
    MAX_PENDING_TIMEOUT_S,
    MAX_PORTS,
    NO_NUL,
    DataName,
    DataUri,
    EnvName,
    Port,
    SecretName,
    parse_port,
)
from bourse.tasks.resources import Resources, Strict
from bourse.tasks.service import Service

COMPATS = ("bourse", "skypilot", "dstack")
Compat = Literal["bourse", "skypilot", "dstack"]
Text = Annotated[str, Field(max_length=131072, pattern=NO_NUL)]
Argument = Annotated[str, Field(max_length=65536, pattern=NO_NUL)]
InputSource = DataUri  # a store URI, or a local path (no "://"), uploaded at submit
EnvValue = StrictStr | StrictInt | StrictFloat | StrictBool | None


def _one_port(value: int | str) -> int | str:
    try:
        parse_port(str(value))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return value


class Task(Strict):
    """A task file: what to run (``run``, after ``setup``), where (``resources``), with what
    (``env``, ``secrets``, ``inputs``, ``workdir``) and what it leaves (``outputs``,
    ``checkpoint``)."""

    name: Annotated[str, Field(max_length=200, pattern=NO_NUL)] | None = Field(
        default=None, description="the job's name")
    resources: Resources = Field(default_factory=Resources)
    setup: Text | None = Field(default=None, description=(
        "a bash script run on every node before run, in the same shell: what it exports, "
        "activates or adds to ~/.bashrc, run sees; a failing command fails the job"))
    run: Text | Annotated[list[Argument], Field(min_length=1, max_length=4096)] = Field(
        description="a bash script, or a command as a list of arguments (an argv)")
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, max_length=1024, description=(
        "variables for the job; a null value copies it from the submitting shell"))
    secrets: list[SecretName] = Field(default_factory=list, max_length=64, description=(
        "project secrets (bourse secrets set) given as variables of the same names"))
    inputs: dict[DataName, InputSource] = Field(default_factory=dict, max_length=64,
                                                description=(
        "data prefetched before the job starts, at $BOURSE_INPUT_<NAME>: NAME: URI, or NAME: a "
        "local path (relative to the task file), uploaded once by its content"))
    outputs: dict[DataName, DataUri] = Field(default_factory=dict, max_length=64, description=(
        "directories the job fills ($BOURSE_OUTPUT_<NAME>), uploaded when it exits 0"))
    checkpoint: DataUri | None = Field(default=None, description=(
        "where the job writes checkpoints ($BOURSE_CHECKPOINT_URI)"))
    workdir: Annotated[str, Field(min_length=1, max_length=4096, pattern=NO_NUL)] = Field(
        default=".", description=(
            "the local directory packed as the job's code, relative to the task file"))
    ports: list[Annotated[StrictInt | StrictStr, AfterValidator(_one_port)]] = Field(
        default_factory=list, max_length=MAX_PORTS,
        description="ports the job serves on 127.0.0.1: 6006 or '8888:keep'")
    max_retries: StrictInt | None = Field(default=None, ge=0, le=100, description=(
        "attempts after a lost node (default 3)"))
    pending_timeout: StrictStr | StrictInt | StrictFloat | None = Field(
        default=None, description="fail if it waits this long to be placed: 90s, 10m, 2h")
    compat: Compat = Field(default="bourse", description=(
        "whose variables run sees besides bourse's: bourse, skypilot or dstack"))
    service: Service | None = Field(default=None, description=(
        "a service's section, run by `bourse serve` (docs/serving.md)"))

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, Any]) -> dict[str, Any]:
        return {name: _env_text(v) for name, v in value.items()}

    def variables(self) -> dict[str, str | None]:
        """``env`` as text (``true``/``false``, numbers as written); None: copy it."""
        return {name: _env_text(v) for name, v in self.env.items()}

    @field_validator("inputs", "outputs")
    @classmethod
    def _uris(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for name, uri in value.items():
            if info.field_name == "outputs" or "://" in uri:  # an input may be a local path
                parse_uri(uri, field=name)
        return value

    @field_validator("checkpoint")
    @classmethod
    def _checkpoint(cls, value: str | None) -> str | None:
        if value is not None:
            parse_uri(value, field="checkpoint")
        return value

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: list[int | str]) -> list[int | str]:
        numbers = [parse_port(str(port)).number for port in value]
        if len(set(numbers)) != len(numbers):
            raise InvalidInput(f"ports {numbers} declare a port twice",
                               hint="declare each once")
        return value

    @field_validator("pending_timeout")
    @classmethod
    def _pending(cls, value: str | float | None) -> str | float | None:
        if value is not None:
            timeout_seconds(value)
        return value

    def port_list(self) -> list[Port]:
        return ports_of(self.ports)

    def pending_timeout_s(self) -> float | None:
        return None if self.pending_timeout is None else timeout_seconds(self.pending_timeout)


def _env_text(value: Any) -> str | None:
    """A variable's value as text: ``true``/``false`` for booleans, numbers as written."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def ports_of(values: list[int | str]) -> list[Port]:
    return [parse_port(str(value)) for value in values]


def timeout_seconds(value: str | float) -> float:
    seconds = parse_duration(value, field="pending_timeout")
    if not 0 < seconds <= MAX_PENDING_TIMEOUT_S:
        raise InvalidInput(f"{value!r}: write a duration from 1s to 365d")
    return seconds
