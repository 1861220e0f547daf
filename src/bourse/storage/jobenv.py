"""What a job sees of the data plane: environment variable names and the environment the agent
builds for an attempt (pure: paths and URIs in, a dict out).

- ``BOURSE_INPUT_<NAME>``: local path of input ``name`` (a directory, or the file when the
  input URI names one object), materialised by prefetch.
- ``BOURSE_OUTPUT_<NAME>``: an empty local directory; uploaded to the output's URI when the job
  ends.
- ``BOURSE_OUTPUT_<NAME>_URI``, ``BOURSE_INPUT_<NAME>_URI``: the URIs themselves.
- ``BOURSE_CHECKPOINT_URI``: a prefix the job writes checkpoints to directly
  (`bourse.storage.save_checkpoint` or any S3 client).
- ``BOURSE_LIGHTNING_LOGS_URI``: where the job's ``lightning_logs/`` goes when an attempt
  ends (``<uri><attempt>/``), the same for every attempt (`bourse.lightning.resume_path`
  reads its checkpoints back).
- S3 endpoint, region and the attempt's scoped key, under the names boto3, the AWS CLI,
  s5cmd and obstore read (`StoreSettings.env`, `AccessKey.env`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from bourse.core.uri import StoreURI
from bourse.storage.credentials import ScopedCredentials
from bourse.storage.errors import InvalidURI
from bourse.storage.settings import StoreSettings

CHECKPOINT_VAR = "BOURSE_CHECKPOINT_URI"
LIGHTNING_LOGS_VAR = "BOURSE_LIGHTNING_LOGS_URI"
LIGHTNING_LOGS = "lightning_logs"  # Lightning's default folder, in the job's working directory


def env_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def input_var(name: str) -> str:
    return f"BOURSE_INPUT_{env_name(name)}"


def output_var(name: str) -> str:
    return f"BOURSE_OUTPUT_{env_name(name)}"


def default_checkpoint(store: StoreURI, job_id: str) -> StoreURI:
    """The per-job checkpoint prefix when a job spec names none."""
    return store.root.join("jobs", job_id, "checkpoints/")


def default_lightning_logs(store: StoreURI, job_id: str) -> StoreURI:
    """Where a job's ``lightning_logs/`` is kept, each attempt's below ``<attempt>/``."""
    return store.root.join("jobs", job_id, LIGHTNING_LOGS + "/")


def _check_unique(kind: str, names: list[str]) -> None:
    seen: dict[str, str] = {}
    variable = input_var if kind == "inputs" else output_var
    for name in names:
        var = variable(name)
        if var in seen:
            raise InvalidURI(f"names {seen[var]!r} and {name!r} map to the same variable "
                             f"{var}", field=kind, hint="rename one of them")
        seen[var] = name


def job_env(*, inputs: Mapping[str, Path], outputs: Mapping[str, Path],
            input_uris: Mapping[str, StoreURI] | None = None,
            output_uris: Mapping[str, StoreURI] | None = None,
            checkpoint: StoreURI | None = None, settings: StoreSettings | None = None,
            credentials: ScopedCredentials | None = None,
            lightning_logs: StoreURI | None = None) -> dict[str, str]:
    """The data-plane part of a job attempt's environment."""
    _check_unique("inputs", list(inputs))
    _check_unique("outputs", list(outputs))
    env = {input_var(name): str(path) for name, path in inputs.items()}
    env |= {output_var(name): str(path) for name, path in outputs.items()}
    env |= {input_var(name) + "_URI": str(uri) for name, uri in (input_uris or {}).items()}
    env |= {output_var(name) + "_URI": str(uri) for name, uri in (output_uris or {}).items()}
    if checkpoint is not None:
        env[CHECKPOINT_VAR] = str(checkpoint.as_prefix())
    if lightning_logs is not None:
        env[LIGHTNING_LOGS_VAR] = str(lightning_logs.as_prefix())
    if settings is not None:
        env |= settings.env()
    if credentials is not None:
        env |= credentials.env()
    return env
