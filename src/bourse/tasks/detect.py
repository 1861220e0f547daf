"""Which format a task file is written in, and the file in bourse's format.

``bourse run FILE`` reads a bourse task file, a SkyPilot task YAML or a dstack ``.dstack.yml``
as they are: `translate` picks the format (`detect`) and hands back a bourse-format mapping,
or raises one `InvalidInput` listing every field that cannot run. The notes say what was
translated with a difference (an exact size read as a minimum, a hint ignored); the caller
shows them, so nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bourse.core.errors import InvalidInput
from bourse.tasks import dstack, imported, skypilot
from bourse.tasks.imported import Translation

BOURSE, SKYPILOT, DSTACK = "bourse", "skypilot", "dstack"
DSTACK_SUFFIXES = (".dstack.yml", ".dstack.yaml")
# fields only SkyPilot's task schema has (bourse's format writes env, resources.gpu, nodes;
# dstack's volumes are told apart by its file name or type first)
SKYPILOT_FIELDS = frozenset({"envs", "num_nodes", "file_mounts", "event_callback", "config",
                             "pool", "volumes", "volume_mounts", "managed_secrets",
                             "file_mounts_mapping", "api_server_access", "_metadata"})
SKYPILOT_RESOURCES = frozenset({"accelerators", "accelerator_args", "use_spot", "disk_size",
                                "disk_tier", "network_tier", "infra", "cloud", "instance_type",
                                "image_id", "any_of", "ordered", "job_recovery", "labels",
                                "autostop", "max_hourly_cost", "ports", "ephemeral_storage",
                                "local_disk", "priority_class", "volumes"})


@dataclass(frozen=True, slots=True)
class Imported:
    """A task file in bourse's format: its mapping, the format it was written in, what
    was translated with a difference, and the field of the source file each input came from
    (``{"id_rsa": "file_mounts.~/.ssh/id_rsa"}``)."""

    mapping: dict[str, Any]
    kind: str
    notes: tuple[str, ...] = field(default=())
    origins: dict[str, str] = field(default_factory=dict)


def detect(data: dict[str, Any], filename: str = "") -> str:
    """``dstack`` for a ``*.dstack.yml`` or a file with dstack's ``type``; ``bourse`` for a file
    that says its ``compat``; ``skypilot`` for one with a field only SkyPilot has; else
    ``bourse``."""
    if filename.endswith(DSTACK_SUFFIXES) or "type" in data:
        return DSTACK
    if "compat" in data:
        return BOURSE
    resources = data.get("resources")
    keys = set(resources) if isinstance(resources, dict) else set()
    if SKYPILOT_FIELDS & set(data) or SKYPILOT_RESOURCES & keys:
        return SKYPILOT
    if isinstance(data.get("workdir"), dict) or isinstance(data.get("secrets"), dict):
        return SKYPILOT
    return BOURSE


def translate(data: Any, filename: str = "") -> Imported:
    """``data`` (a parsed task file) in bourse's format; raises `InvalidInput` naming every
    field of a SkyPilot or dstack file that cannot run."""
    if not isinstance(data, dict):
        raise InvalidInput(f"{filename or 'the task file'}: a task file is a mapping of fields, "
                           f"not {type(data).__name__}", hint="write name:, resources:, run:")
    kind = detect(data, filename)
    if kind == BOURSE:
        return Imported(data, BOURSE)
    translation = translate_as(kind, data)
    if translation.refusals:
        raise imported.refusal_error(translation, filename or f"this {kind} file")
    return Imported(translation.mapping, kind, tuple(translation.notes),
                    dict(translation.origins))


def translate_as(kind: str, data: dict[str, Any]) -> Translation:
    """The whole translation (refusals included) of a file known to be ``kind``."""
    if kind == SKYPILOT:
        return skypilot.translate(data)
    if kind == DSTACK:
        return dstack.translate(data)
    raise InvalidInput(f"cannot translate from {kind!r}", hint="skypilot or dstack")
