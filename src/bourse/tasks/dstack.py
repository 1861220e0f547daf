"""A dstack ``type: task`` configuration (``.dstack.yml``) as a bourse task-file mapping
(``compat: dstack``).

Every field of dstack's ``TaskConfiguration`` (``core/models/configurations.py``: the run
configuration's fields, the profile's in ``profiles.py``, ``commands``, ``ports``, ``nodes``,
``groups``) is read. ``commands`` become ``run``, joined with ``&&`` as dstack joins them;
``env``, ``image``, ``nodes``, ``ports``, ``max_price``, ``spot_policy``, ``backends`` and
``regions`` translate directly; ``files`` that lie under the configuration's directory at the
same path are already in the job's code (bourse packs that directory), the others become
inputs shown at their paths (`mounts`), and ``repos: [..]`` becomes the workdir. Services,
dev environments, volumes, Docker-in-Docker, node groups and dstack's own machinery are
refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bourse.tasks import dstack_resources, imported, mounts
from bourse.tasks.imported import Translation

KIND = "dstack"
BACKENDS = {"vastai": "vast", "lambda": "lambda"}
_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
NO_VOLUMES = "put the data in the exchange's store and name it in a bourse task's inputs"
REFUSED = {  # field -> (reason, what to do instead)
    "user": ("bourse runs a job as its node's job user", "remove it"),
    "entrypoint": ("bourse runs commands, not an image's entrypoint", "write commands"),
    "working_dir": ("a job runs in its own copy of its code", "cd in commands"),
    "registry_auth": ("bourse pulls public images only", "use a public image, or none"),
    "volumes": ("bourse mounts no volumes", NO_VOLUMES),
    "instance_types": ("bourse matches requirements, not a cloud's instance types",
                       "write resources instead"),
    "reservation": ("bourse cannot use a cloud reservation", "remove it"),
    "schedule": ("bourse starts a job when it is submitted", "submit it from cron"),
    "fleets": ("bourse places on its own nodes, not dstack fleets", "remove it"),
    "instances": ("bourse places on its own nodes, not dstack fleet instances", "remove it"),
    "backend_options": ("dstack's per-backend options", "remove them"),
    "groups": ("node groups with their own commands and resources",
               "submit one task per group, or use nodes: N with one set of commands"),
    "max_duration": ("bourse does not stop a job after a time", "stop it with bourse stop, or "
                                                                "use timeout in commands"),
}
HINTS = {  # fields that change neither what runs nor its results: translated to nothing, said
    "priority": "bourse places jobs in the order they were submitted",
    "stop_duration": "bourse gives a stopped job its own grace period",
    "creation_policy": "bourse places on live nodes and launches when none fits",
    "idle_duration": "bourse ends launched machines by its own idle timeout",
    "utilization_policy": "bourse flags stalled jobs; it does not stop them for low use",
    "tags": "bourse does not tag machines (its resources.tags are required compliance tags)",
    "single_branch": "bourse packs a local directory, not a Git clone",
    "home_dir": "dstack's deprecated field, which has no effect",
    "setup": "dstack's deprecated field, which has no effect for tasks",
}
FLAGS = {  # true refused, false is the default
    "privileged": "a job cannot run privileged",
    "docker": "Docker inside the job is not offered",
    "dstack": "there is no dstack server inside bourse",
    "nvcc": "bourse runs on the node as it is, with no CUDA compiler image",
}


def translate(data: dict[str, Any]) -> Translation:
    """The bourse-format mapping of a dstack task, its refusals and notes."""
    t = Translation(KIND, {"compat": KIND})
    kind = data.get("type")
    if kind != "task":
        _not_a_task(kind, t)
        return t
    for key, value in data.items():
        _field(str(key), value, data, t)
    if not data.get("commands"):
        t.refuse("commands", "missing: bourse runs commands, not an image's entrypoint",
                 "add commands: with what to run")
    return t


def _not_a_task(kind: Any, t: Translation) -> None:
    if kind == "service":
        t.refuse("type", "a dstack service: services are `bourse serve` (issue 20)",
                 "write type: task to run its commands once")
    elif kind == "dev-environment":
        t.refuse("type", "a dev environment: bourse runs tasks",
                 "write a task with the commands to run, or use bourse exec in a running job")
    else:
        t.refuse("type", f"{kind!r} is not a run configuration bourse can run",
                 "write type: task")


def _field(key: str, value: Any, data: dict[str, Any], t: Translation) -> None:
    if key in REFUSED:
        t.refuse(key, *REFUSED[key])
    elif key in HINTS:
        t.note(key, f"ignored: {HINTS[key]}")
    elif key in FLAGS:
        if value:
            t.refuse(key, FLAGS[key], f"remove {key}: true")
    elif key in FIELDS:
        FIELDS[key](value, key, t)
    else:
        imported.unknown_field(t, key, key, [*FIELDS, *REFUSED, *HINTS, *FLAGS],
                               "a dstack task")


def _type(value: Any, where: str, t: Translation) -> None:
    """Checked in `translate`."""


def _name(value: Any, where: str, t: Translation) -> None:
    t.mapping["name"] = str(value)


def _commands(value: Any, where: str, t: Translation) -> None:
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        t.refuse(where, "must be a list of shell commands", "write commands: [cmd, ...]")
        return
    commands = [c for c in (_command(c, where, t) for c in value) if c is not None]
    if len(commands) == len(value) and commands:
        t.mapping["run"] = " &&\n".join(commands)


def _command(command: str, where: str, t: Translation) -> str | None:
    """One command as dstack runs it: stripped, a background one braced (so that ``&&`` does
    not bind to it), ``${{ run.args }}`` empty (bourse run passes no arguments)."""
    text = command.strip()
    if "run.args" in text:
        t.note(where, "${{ run.args }} is empty: bourse run passes no extra arguments")
    text = _EXPRESSION.sub(lambda m: "" if m.group(1) == "run.args" else m.group(0), text)
    left = _EXPRESSION.search(text)
    if left:
        t.refuse(where, f"dstack fills in ${{{{ {left.group(1)} }}}}; bourse does not",
                 "use an environment variable instead (DSTACK_NODE_RANK, DSTACK_NODES_IPS)")
        return None
    return f"{{ {text} }}" if text.endswith("&") else text


def _env(value: Any, where: str, t: Translation) -> None:
    pairs: list[tuple[str, str | None]]
    if isinstance(value, dict):
        pairs = [(str(k), None if v is None else str(v)) for k, v in value.items()]
    elif isinstance(value, list):
        pairs = [(name, text if sep else None) for name, sep, text in
                 (str(item).partition("=") for item in value)]
    else:
        t.refuse(where, "must be a list of NAME=value or a mapping", "write env: [NAME=value]")
        return
    t.mapping["env"] = dict(pairs)
    given = sorted(name for name, v in pairs if v is None)
    if given:
        t.note(where, f"{', '.join(given)} must be set where bourse run runs (copied from that "
                      "shell, as dstack does)")


def _image(value: Any, where: str, t: Translation) -> None:
    t.resources["image"] = str(value)
    t.note(where, "placed only on nodes with a container engine")


def _python(value: Any, where: str, t: Translation) -> None:
    t.note(where, f"bourse runs commands with the node's python3, not dstack's Python {value} "
                  "image; use image: python:<version> for a given version")


def _shell(value: Any, where: str, t: Translation) -> None:
    if value in (None, "bash", "/bin/bash", "/usr/bin/bash"):
        return
    if value in ("sh", "/bin/sh"):
        t.note(where, "bourse runs commands with bash, which runs sh commands")
        return
    t.refuse(where, f"bourse runs commands with bash, not {value}", "remove shell")


def _resources(value: Any, where: str, t: Translation) -> None:
    dstack_resources.translate(value, t)


def _nodes(value: Any, where: str, t: Translation) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        t.refuse(where, f"must be a whole number from 1, got {value!r}", "write e.g. 2")
    elif value > 1:
        t.resources["nodes"] = value


def _ports(value: Any, where: str, t: Translation) -> None:
    if not isinstance(value, list):
        t.refuse(where, "must be a list of ports", "write ports: [8000]")
        return
    ports = [_port(p, where, t) for p in value]
    if all(p is not None for p in ports) and ports:
        t.mapping["ports"] = ports


def _port(value: Any, where: str, t: Translation) -> int | None:
    local, _, container = str(value).rpartition(":")
    if not container.isdigit() or not 1024 <= int(container) <= 65535:
        t.refuse(where, f"port {value!r}: bourse forwards ports from 1024 to 65535",
                 "serve on a port above 1023")
        return None
    if local and local != container:
        t.note(where, f"{value}: bourse serves container port {container} through the "
                      "exchange; there is no local port to choose")
    return int(container)


def _price(value: Any, where: str, t: Translation) -> None:
    t.resources["max_price"] = value


def _spot(value: Any, where: str, t: Translation) -> None:
    policy = {"spot": "only", "on-demand": "never", "auto": "prefer"}.get(str(value))
    if policy is None:
        t.refuse(where, f"unknown spot policy {value!r}", "write spot, on-demand or auto")
    else:
        t.resources["spot"] = policy


def _backends(value: Any, where: str, t: Translation) -> None:
    names = value if isinstance(value, list) else [value]
    found = [imported.provider(str(n), where, t, BACKENDS) for n in names]
    if all(found):
        t.resources["providers"] = found


def _regions(value: Any, where: str, t: Translation) -> None:
    names = value if isinstance(value, list) else [value]
    t.resources.setdefault("regions", []).extend(str(n) for n in names)


def _retry(value: Any, where: str, t: Translation) -> None:
    events = ["no-capacity", "interruption", "error"] if value is True else (
        value.get("on_events", ["no-capacity", "interruption", "error"])
        if isinstance(value, dict) else [])
    if "error" in events:
        t.refuse(where, "bourse does not run a job again when it exits with an error",
                 "retry on interruption and no-capacity only (bourse does both itself)")
    elif events:
        t.note(where, "bourse waits for capacity and retries an attempt whose node is lost "
                      "(max_retries, default 3)")


def _startup(value: Any, where: str, t: Translation) -> None:
    if value == "workers-first":
        t.refuse(where, "bourse starts rank 0 first, then the others", "remove startup_order")
    elif value not in (None, "any", "master-first"):
        t.refuse(where, f"unknown startup order {value!r}", "remove startup_order")


def _stop(value: Any, where: str, t: Translation) -> None:
    if value not in (None, "all-done"):
        t.refuse(where, "a bourse gang ends when every member has ended",
                 "remove stop_criteria, or end the workers from rank 0")


def _files(value: Any, where: str, t: Translation) -> None:
    if not isinstance(value, list):
        t.refuse(where, "must be a list of paths", "write files: [local_path:path, ...]")
        return
    lines = [line for n, entry in enumerate(value)
             if (line := _file(entry, f"{where}[{n}]", t)) is not None]
    t.setup_first(mounts.script(lines))


def _file(entry: Any, where: str, t: Translation) -> str | None:
    """One of ``files``: nothing when the job's code has it there already, else an input
    linked at its path (the local path's own where none is given)."""
    local, target = _file_entry(entry)
    if not local:
        t.refuse(where, f"{entry!r} names no local path", "write local_path:path")
        return None
    inside = imported.relative_path(local) and ".." not in local.split("/")
    if inside and target in (None, local, f"./{local}", "."):
        t.note(where, f"{local} is in the job's code already (bourse packs the task file's "
                      "directory)")
        return None
    return mounts.mount(t, where, str(target or local), local)


def _file_entry(entry: Any) -> tuple[str, str | None]:
    if isinstance(entry, dict):
        return str(entry.get("local_path", "")), entry.get("path")
    local, sep, target = str(entry).partition(":")
    return local, target if sep else None


def _repos(value: Any, where: str, t: Translation) -> None:
    for entry in value if isinstance(value, list) else []:
        local, path = _repo_entry(entry)
        if "://" in local or local.startswith("git@"):
            t.refuse(where, f"{local}: bourse packs a local directory, not a remote repository",
                     "clone it, and point workdir at the clone (or git clone in commands)")
        elif path is not None:
            t.refuse(where, f"a repository at {path}: bourse runs a job in its own copy",
                     "remove the path and read the code from the job's directory")
        else:
            t.mapping["workdir"] = local
            t.note(where, f"{local} becomes the workdir: bourse packs it as the job's code "
                          "(uncommitted changes included)")


def _repo_entry(entry: Any) -> tuple[str, str | None]:
    if isinstance(entry, dict):
        return str(entry.get("local_path") or entry.get("url") or ""), entry.get("path")
    text = str(entry)
    if "://" in text or text.startswith("git@"):
        return text, None
    local, sep, path = text.partition(":")
    return local, path if sep else None


FIELDS: dict[str, Callable[[Any, str, Translation], None]] = {
    "type": _type, "name": _name, "commands": _commands, "env": _env, "image": _image,
    "python": _python, "shell": _shell, "resources": _resources, "nodes": _nodes,
    "ports": _ports, "max_price": _price, "spot_policy": _spot, "backends": _backends,
    "regions": _regions, "availability_zones": _regions, "retry": _retry,
    "startup_order": _startup, "stop_criteria": _stop, "files": _files, "repos": _repos,
}
