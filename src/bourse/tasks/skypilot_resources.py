"""A SkyPilot task's ``resources`` section as bourse ``resources`` (and ``ports``).

Every field of SkyPilot's resources schema (``sky/utils/schemas.py``,
``get_resources_schema``) is read here. Accelerator names go through bourse's GPU catalogue as
exact models (SkyPilot's ``A100`` is the 40 GB part); a set or list of accelerators, and
``any_of`` / ``ordered`` candidates that differ only in accelerators, become bourse's GPU
alternatives (``l4|a10g:1``), which share one count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bourse.core.errors import InvalidInput
from bourse.tasks import imported
from bourse.tasks.imported import Translation

WHERE = "resources"
SOURCE = "SkyPilot"
# SkyPilot's cloud names where they differ from bourse's providers
CLOUDS = {"vast": "vast", "lambda": "lambda"}
CLUSTERS = ("kubernetes", "k8s", "ssh", "slurm")
HINTS = {  # fields that change neither what runs nor its results: translated to nothing, said
    "disk_tier": "bourse nodes have the disks they have; a tier cannot be asked for",
    "network_tier": "bourse has no network tiers; gangs are placed on one network",
    "labels": "bourse does not label machines (its resources.tags are required compliance "
              "tags, a different thing)",
    "autostop": "bourse nodes are not clusters a job keeps; a node is free when the job ends",
    "priority": "bourse places jobs in the order they were submitted",
    "priority_class": "bourse places jobs in the order they were submitted",
    "local_disk": "bourse cannot ask for a local NVMe disk; the job uses the node's disk",
}
REFUSED = {  # field -> (reason, what to do instead)
    "instance_type": ("bourse matches requirements, not a cloud's instance types",
                      "write accelerators, cpus and memory instead"),
    "accelerator_args": ("TPU arguments: bourse has no TPUs", "use a GPU"),
    "volumes": ("instance volumes are SkyPilot's; bourse mounts no volumes",
                "copy the data into the exchange's store (bourse cp) and mount its s3:// "
                "URI in file_mounts"),
}


def translate(resources: Any, t: Translation) -> None:
    """Fill ``t.resources`` (and ``t.mapping['ports']``) from SkyPilot's ``resources``."""
    if resources is None:
        return
    if not isinstance(resources, dict):
        t.refuse(WHERE, "must be a mapping", "write resources: {accelerators: A100:1, ...}")
        return
    candidates = [k for k in ("any_of", "ordered") if k in resources]
    base = {k: v for k, v in resources.items() if k not in ("any_of", "ordered")}
    for key, value in base.items():
        _field(key, value, t)
    for key in candidates:
        _candidates(key, resources[key], base, t)


def _field(key: str, value: Any, t: Translation) -> None:
    where = f"{WHERE}.{key}"
    if key in HINTS:
        t.note(where, f"ignored: {HINTS[key]}")
    elif key in REFUSED:
        t.refuse(where, *REFUSED[key])
    elif key in FIELDS:
        FIELDS[key](value, where, t)
    elif key.startswith("_"):
        t.refuse(where, "SkyPilot's internal field", "remove it")
    else:
        imported.unknown_field(t, where, key, [*FIELDS, *HINTS, *REFUSED, "any_of", "ordered"],
                               "SkyPilot's resources")


def _accelerators(value: Any, where: str, t: Translation) -> None:
    pairs = accelerator_pairs(value, where, t)
    if pairs is None:
        return
    if isinstance(value, list) and len(pairs) > 1:
        t.note(where, "SkyPilot tries these in order; bourse takes any of them that fits")
    gpu = gpu_of(pairs, where, t)
    if gpu is not None:
        t.resources["gpu"] = gpu


def accelerator_pairs(value: Any, where: str, t: Translation) -> list[tuple[str, int]] | None:
    """(catalogue id, count) for each accelerator written; None when one is refused."""
    if isinstance(value, str) and value.strip().startswith("{"):
        items: list[tuple[str, Any]] = [(n, None) for n in value.strip("{} ").split(",")]
    elif isinstance(value, str):
        items = [(value, None)]
    elif isinstance(value, list):
        items = [(str(v), None) for v in value]
    elif isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    else:
        t.refuse(where, f"cannot read accelerators from {value!r}", "write e.g. A100:8")
        return None
    pairs = [_pair(name.strip().strip("'\""), n, where, t) for name, n in items]
    return None if any(p is None for p in pairs) else [p for p in pairs if p is not None]


def _pair(text: str, written: Any, where: str, t: Translation) -> tuple[str, int] | None:
    name, sep, number = text.partition(":")
    raw: Any = written if written is not None else (_number(number) if sep else 1)
    how_many = imported.whole_count(raw, where, t)
    try:
        label = imported.gpu_label(name.strip(), exact=True)
    except InvalidInput as exc:
        t.refuse(where, f"{exc.message} (not in bourse's GPU catalogue)",
                 exc.hint or "run `bourse gpus` to list known GPUs")
        return None
    return None if how_many is None else (label, how_many)


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def gpu_of(pairs: list[tuple[str, int]], where: str, t: Translation) -> str | None:
    counts = {n for _, n in pairs}
    if len(counts) > 1:
        written = ", ".join(f"{label}:{n}" for label, n in pairs)
        t.refuse(where, f"alternatives with different counts ({written})",
                 "bourse's GPU alternatives share one count: keep those with the same count, "
                 "e.g. a10g|l4:8")
        return None
    return imported.gpu_text([label for label, _ in pairs], counts.pop())


def _candidates(key: str, value: Any, base: dict[str, Any], t: Translation) -> None:
    where = f"{WHERE}.{key}"
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value) or not value:
        t.refuse(where, "must be a list of resource mappings", "see SkyPilot's any_of")
        return
    differ = sorted({k for c in value for k in c if k != "accelerators" and c[k] != base.get(k)})
    if differ:
        t.refuse(where, f"candidates differ in {', '.join(differ)}, not only in accelerators",
                 "bourse's alternatives are GPU alternatives: keep one candidate's "
                 f"{', '.join(differ)} in resources, or list only accelerators")
        return
    pairs: list[tuple[str, int]] = []
    for n, candidate in enumerate(value):
        found = accelerator_pairs(candidate.get("accelerators", base.get("accelerators")),
                                  f"{where}[{n}].accelerators", t)
        if found is None:
            return
        pairs += found
    if key == "ordered":
        t.note(where, "SkyPilot tries these in order; bourse takes any of them that fits")
    gpu = gpu_of(pairs, where, t)
    if gpu is not None:
        t.resources["gpu"] = gpu


def _cpus(value: Any, where: str, t: Translation) -> None:
    parsed = imported.count(value, where, t)
    if parsed is not None:
        t.resources["cpus"] = imported.at_least(t, where, *parsed, SOURCE)


def _memory(value: Any, where: str, t: Translation) -> None:
    parsed = imported.size(value, where, t)
    if parsed is not None:
        t.resources["memory"] = imported.at_least(t, where, *parsed, SOURCE)


def _disk(value: Any, where: str, t: Translation) -> None:
    parsed = imported.size(value, where, t)
    if parsed is not None:  # the OS disk SkyPilot provisions: a node with at least as much
        t.resources["disk"] = f"{parsed[0]}+"


def _spot(value: Any, where: str, t: Translation) -> None:
    if not isinstance(value, bool):
        t.refuse(where, f"use_spot must be true or false, got {value!r}", "write true or false")
        return
    t.resources["spot"] = "only" if value else "never"


def _cloud(value: Any, where: str, t: Translation) -> None:
    text = str(value).lower()
    if text in CLUSTERS:
        t.refuse(where, f"{value!r} is a cluster SkyPilot reaches itself",
                 "drop it: bourse places on its own nodes (enrol those machines as agents)")
        return
    found = imported.provider(text, where, t, CLOUDS)
    if found:
        t.resources["providers"] = [found]


def _place(value: Any, where: str, t: Translation) -> None:
    """``region`` and ``zone``: both are regions globs in bourse."""
    if not isinstance(value, str) or not value.strip():
        t.refuse(where, f"must be a name, got {value!r}", "write e.g. us-east-1")
        return
    t.resources.setdefault("regions", []).append(value.strip())


def _infra(value: Any, where: str, t: Translation) -> None:
    """``cloud[/region[/zone]]``, ``*`` for any part, ``k8s[/context]``."""
    if not isinstance(value, str) or not value.strip():
        t.refuse(where, f"cannot read infra {value!r}", "write e.g. aws/us-east-1")
        return
    cloud, _, place = value.strip().partition("/")
    if cloud.lower() in CLUSTERS:
        _cloud(cloud, where, t)
        return
    if cloud != "*":
        _cloud(cloud, where, t)
    region, _, zone = place.partition("/")
    for part in (region, zone):
        if part and part != "*":
            _place(part, where, t)


def _image(value: Any, where: str, t: Translation) -> None:
    if isinstance(value, str) and value.startswith("docker:") and value[7:].strip():
        t.resources["image"] = value[7:].strip()
        return
    t.refuse(where, f"{value!r} is a machine image of a cloud",
             "bourse runs on its nodes as they are: drop it, or use a container image "
             "(image_id: docker:<image>)")


def _ports(value: Any, where: str, t: Translation) -> None:
    items = value if isinstance(value, list) else [] if value is None else [value]
    ports: list[int] = []
    for item in items:
        text = str(item).strip()
        if not text.isdigit() or not 1024 <= int(text) <= 65535:
            t.refuse(where, f"port {item!r}: bourse forwards single ports from 1024 to 65535",
                     "list each port (8080, 8081), and serve on a port above 1023")
            return
        ports.append(int(text))
    if ports:
        t.mapping["ports"] = ports
        t.note(where, "bourse opens no port to the internet: the exchange proxies each, behind "
                      "its auth, at /jobs/<id>/ports/<port>/; the job must serve on 127.0.0.1 "
                      "or 0.0.0.0")


def _price(value: Any, where: str, t: Translation) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        t.refuse(where, f"must be a price in dollars per hour, got {value!r}", "write e.g. 2.5")
        return
    t.resources["max_price"] = value


def _recovery(value: Any, where: str, t: Translation) -> None:
    restarts = value.get("max_restarts_on_errors", 0) if isinstance(value, dict) else 0
    if restarts:
        t.refuse(where, "bourse does not run a job again when it exits with an error",
                 "drop max_restarts_on_errors (a lost node's attempt is retried: max_retries)")
        return
    t.note(where, "bourse retries an attempt whose node is lost or preempted on its own "
                  "(max_retries, default 3)")


def _ephemeral(value: Any, where: str, t: Translation) -> None:
    t.note(where, "SkyPilot's deprecated name for disk_size, read as disk_size")
    _disk(value, where, t)


FIELDS: dict[str, Callable[[Any, str, Translation], None]] = {
    "accelerators": _accelerators, "cpus": _cpus, "memory": _memory, "disk_size": _disk,
    "ephemeral_storage": _ephemeral, "use_spot": _spot, "cloud": _cloud, "region": _place,
    "zone": _place, "infra": _infra, "image_id": _image, "ports": _ports,
    "max_hourly_cost": _price, "job_recovery": _recovery,
}
