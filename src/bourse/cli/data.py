"""The data flags of ``bourse run``: ``--input NAME=URI``, ``--output NAME=URI`` (repeatable)
and ``--checkpoint URI``, and how ``bourse jobs show`` prints a job's data."""

from __future__ import annotations

from typing import Any

import click

from bourse.core.errors import InvalidInput
from bourse.protocol.api import JobView


def data_options(command: Any) -> Any:
    options = [
        click.option("--input", "inputs", multiple=True, metavar="NAME=URI|PATH",
                     help="Data the job reads, prefetched to the node before it starts; the "
                     "job finds it at $BOURSE_INPUT_<NAME> (repeatable). A local path is "
                     "uploaded once to the project's home in the store (unchanged data is "
                     "not uploaded again)."),
        click.option("--output", "outputs", multiple=True, metavar="NAME=URI",
                     help="A directory the job fills ($BOURSE_OUTPUT_<NAME>), uploaded to URI "
                     "when it exits 0; the job succeeds once it is (repeatable)."),
        click.option("--checkpoint", metavar="URI", help="Where the job writes checkpoints "
                     "($BOURSE_CHECKPOINT_URI; default: a prefix of its own in the store)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def named(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    """``NAME=URI`` pairs as a dict; a pair without ``=`` or a repeated name is an error."""
    found: dict[str, str] = {}
    for pair in pairs:
        name, sep, uri = pair.partition("=")
        if not sep or not name or not uri:
            raise InvalidInput(f"--{option} {pair!r} is not NAME=URI", field=option,
                               hint=f"e.g. --{option} data=s3://datasets/digits/")
        if name in found:
            raise InvalidInput(f"--{option} {name} is given twice", field=option)
        found[name] = uri
    return found


def data_fields(flags: dict[str, Any]) -> dict[str, Any]:
    """The JobSpec fields of the data flags (None where not given)."""
    return {"inputs": named(flags.get("inputs", ()), "input") or None,
            "outputs": named(flags.get("outputs", ()), "output") or None,
            "checkpoint": flags.get("checkpoint")}


def data_facts(job: JobView) -> dict[str, str | None]:
    """The lines of ``bourse jobs show`` about data: what goes in, what came out, where
    checkpoints go."""
    spec, uploaded = job.spec, job.outputs or {}
    outputs = [f"{name}={uri}" + (" (uploaded)" if name in uploaded else "")
               for name, uri in spec.outputs.items()]
    outputs += [f"{name}={uri} (kept by the node)" for name, uri in uploaded.items()
                if name not in spec.outputs]  # lightning_logs/, however the job ended
    return {"inputs": ", ".join(f"{n}={u}" for n, u in spec.inputs.items()) or None,
            "outputs": ", ".join(outputs) or None, "checkpoint": spec.checkpoint,
            "progress": job.progress}
