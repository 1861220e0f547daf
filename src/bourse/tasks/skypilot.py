"""A SkyPilot task YAML as a bourse task-file mapping (``compat: skypilot``).

Every field of SkyPilot's task schema (``sky/utils/schemas.py``, ``get_task_schema``) is read:
``name``, ``num_nodes``, ``setup``, ``run``, ``envs``, ``secrets`` and ``workdir`` translate
directly; ``resources`` in `skypilot_resources`; ``file_mounts`` whose source is an ``s3://`` URI or
a local path become inputs, shown at the mount path (`mounts`: relative to the workdir, where
SkyPilot puts relative paths too, absolute, or in ``~``). Other stores, buckets SkyPilot
creates, system paths, services and SkyPilot's own machinery are refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bourse.tasks import imported, mounts, skypilot_resources
from bourse.tasks.imported import Translation

KIND = "skypilot"
REFUSED = {  # field -> (reason, what to do instead)
    "service": ("a SkyServe service: services are `bourse serve` (issue 20), not `bourse run`",
                "remove service: to run the replica's command once as a task"),
    "pool": ("a SkyPilot pool of workers", "submit each job with bourse run"),
    "event_callback": ("SkyPilot's managed-job callback", "remove it; bourse logs -f follows "
                                                          "a job"),
    "config": ("SkyPilot's per-task configuration (docker, kubernetes, ...)", "remove it"),
    "inputs": ("SkyPilot's input-size hint for its optimizer",
               "remove it; data a job reads goes in a bourse task's inputs"),
    "outputs": ("SkyPilot's output-size hint for its optimizer",
                "remove it; results go in a bourse task's outputs"),
    "volumes": ("SkyPilot volumes: bourse mounts no volumes",
                "copy the data into the exchange's store (bourse cp) and mount its "
                "s3:// URI in file_mounts; write results to a bourse task's outputs"),
    "volume_mounts": ("SkyPilot volumes: bourse mounts no volumes",
                      "copy the data into the exchange's store (bourse cp) and mount its "
                      "s3:// URI in file_mounts; write results to a bourse task's outputs"),
    "managed_secrets": ("SkyPilot's managed secrets",
                        "store them as project secrets (bourse secrets set NAME) and list "
                        "them under secrets"),
    "file_mounts_mapping": ("SkyPilot's internal field", "remove it"),
    "api_server_access": ("access to SkyPilot's API server", "remove it"),
    "_metadata": ("SkyPilot's internal field", "remove it"),
}


def translate(data: dict[str, Any]) -> Translation:
    """The bourse-format mapping of a SkyPilot task, its refusals and notes."""
    t = Translation(KIND, {"compat": KIND})
    for written, value in data.items():
        key = str(written)
        if key in REFUSED:
            t.refuse(key, *REFUSED[key])
        elif key in FIELDS:
            FIELDS[key](value, data, t)
        else:
            imported.unknown_field(t, key, key, [*FIELDS, *REFUSED], "a SkyPilot task")
    _sky_paths(data, t)
    if "run" not in data or data["run"] is None:
        t.refuse("run", "missing: SkyPilot provisions a cluster without it, bourse runs a "
                        "command", "add run: with the command to run")
    return t


def _sky_paths(data: dict[str, Any], t: Translation) -> None:
    scripts = " ".join(str(data.get(k) or "") for k in ("setup", "run"))
    if "sky_workdir" in scripts:
        t.note("run", "~/sky_workdir is a link to the job's own copy of the workdir (its "
                      "current directory), made when the job has no ~/sky_workdir already")
    if "CUDA_VISIBLE_DEVICES" in str(data.get("setup") or ""):
        t.note("setup", "setup sees CUDA_VISIBLE_DEVICES set to the job's GPUs (empty without "
                        "any), where SkyPilot leaves it unset: bourse never shows a job GPUs "
                        "it was not given")
    if "SKYPILOT_CLUSTER_INFO" in scripts:
        t.note("run", "SKYPILOT_CLUSTER_INFO is not set on bourse")


def _name(value: Any, data: dict[str, Any], t: Translation) -> None:
    t.mapping["name"] = str(value)


def _script(key: str) -> Callable[[Any, dict[str, Any], Translation], None]:
    def put(value: Any, data: dict[str, Any], t: Translation) -> None:
        if value is None:
            return
        if not isinstance(value, str):
            t.refuse(key, f"must be a shell script, got {type(value).__name__}",
                     f"write {key}: | followed by the commands")
            return
        t.mapping[key] = (t.mapping.get(key, "") + value) if key == "setup" else value
    return put


def _nodes(value: Any, data: dict[str, Any], t: Translation) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        t.refuse("num_nodes", f"must be a whole number from 1, got {value!r}", "write e.g. 2")
        return
    if value > 1:
        t.resources["nodes"] = value


def _resources(value: Any, data: dict[str, Any], t: Translation) -> None:
    skypilot_resources.translate(value, t)


def _envs(value: Any, data: dict[str, Any], t: Translation) -> None:
    if not isinstance(value, dict):
        t.refuse("envs", "must be a mapping of names to values", "write envs: {NAME: value}")
        return
    env = {str(k): None if v is None else _text(v) for k, v in value.items()}
    t.mapping["env"] = env
    given = sorted(k for k, v in env.items() if v is None)
    if given:
        t.note("envs", f"{', '.join(given)} must be set where bourse run runs (null copies "
                       "them from that shell, as SkyPilot's --env NAME does)")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _secrets(value: Any, data: dict[str, Any], t: Translation) -> None:
    if isinstance(value, list):
        names = [str(v) for v in value]
    elif isinstance(value, dict):
        inline = sorted(str(k) for k, v in value.items() if v is not None)
        if inline:
            t.refuse("secrets", f"values of {', '.join(inline)} are written in the file",
                     "store them as project secrets (bourse secrets set NAME) and write "
                     "NAME: null")
            return
        names = [str(k) for k in value]
    else:
        t.refuse("secrets", "must be a list or a mapping of names", "write secrets: [HF_TOKEN]")
        return
    t.mapping["secrets"] = names
    t.note("secrets", f"{', '.join(names)} are read from the project's secrets (bourse secrets "
                      "set), not from the submitting shell")


def _workdir(value: Any, data: dict[str, Any], t: Translation) -> None:
    if not isinstance(value, str):
        t.refuse("workdir", "a Git repository: bourse packs a local directory as the job's code",
                 "clone it and point workdir at the clone, or git clone in setup")
        return
    t.mapping["workdir"] = value
    if value not in (".", "./"):
        t.note("workdir", "bourse reads a relative workdir from the task file's directory "
                          "(SkyPilot: from where sky runs); the job runs in its own copy, "
                          "which ~/sky_workdir links to")


def _mounts(value: Any, data: dict[str, Any], t: Translation) -> None:
    if not isinstance(value, dict):
        t.refuse("file_mounts", "must be a mapping of paths", "write file_mounts: {path: s3://}")
        return
    env = {k: v for k, v in (t.mapping.get("env") or _plain_env(data)).items()}
    links = [line for path, source in value.items()
             if (line := _mount(str(path), source, env, t)) is not None]
    t.setup_first(mounts.script(links))


def _plain_env(data: dict[str, Any]) -> dict[str, str | None]:
    envs = data.get("envs")
    return {str(k): None if v is None else _text(v) for k, v in envs.items()} \
        if isinstance(envs, dict) else {}


def _mount(path: str, source: Any, env: dict[str, str | None], t: Translation) -> str | None:
    """One mount: a link line when it became an input, None when refused."""
    where = f"file_mounts.{path}"
    uri = _source_uri(source, where, t)
    if uri is None:
        return None
    resolved_path, resolved_uri = imported.interpolate(path, env), imported.interpolate(uri, env)
    if resolved_path is None or resolved_uri is None:
        t.refuse(where, "uses a variable with no value in envs",
                 "give it a value in envs (SkyPilot fills these in when it reads the file)")
        return None
    if "://" in resolved_uri and not resolved_uri.startswith("s3://"):
        _other_source(resolved_uri, where, t)
        return None
    return mounts.mount(t, where, resolved_path, resolved_uri)


def _source_uri(source: Any, where: str, t: Translation) -> str | None:
    if isinstance(source, str):
        return source
    if not isinstance(source, dict):
        t.refuse(where, f"cannot read the source {source!r}", "write a path or a store URI")
        return None
    if str(source.get("store", "")).lower() == "volume":
        t.refuse(where, "a SkyPilot volume: bourse mounts no volumes",
                 "put the data in the exchange's store and mount its s3:// URI")
        return None
    found = source.get("source")
    if found is None:
        t.refuse(where, "a bucket SkyPilot creates or mounts by name, read and written",
                 "write results to an output instead: a bourse task's outputs: "
                 "{NAME: s3://bucket/prefix/}, filled at $BOURSE_OUTPUT_<NAME>")
        return None
    if not isinstance(found, str):
        t.refuse(where, "a list of sources", "mount each source at its own path")
        return None
    return found


def _other_source(uri: str, where: str, t: Translation) -> None:
    scheme = uri.partition("://")[0]
    if scheme.lower() == "r2":
        t.refuse(where, "an R2 bucket: R2 is S3-compatible, and bourse reads it as s3:// on "
                        "an exchange whose store is R2", "write the URI as s3://")
    else:
        t.refuse(where, f"a {scheme}:// store: jobs get store credentials for s3:// only",
                 "copy the data into the exchange's store (bourse cp) and mount its s3:// URI")


FIELDS: dict[str, Callable[[Any, dict[str, Any], Translation], None]] = {
    "name": _name, "setup": _script("setup"), "run": _script("run"), "num_nodes": _nodes,
    "resources": _resources, "envs": _envs, "secrets": _secrets, "workdir": _workdir,
    "file_mounts": _mounts,
}
