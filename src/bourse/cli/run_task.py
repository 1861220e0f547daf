"""``bourse run task.yaml [FLAGS] [-- ARGS]``: a task file submitted as a job.

Flags override the file's fields, given before the file or after it (after wins): a Compute
flag replaces that field of ``resources`` (``--gpu``, ``--nodes``...; ``--region`` replaces
``region``, ``zone`` and ``regions``), ``--name``, ``--max-retries``, ``--pending-timeout`` and
``--checkpoint`` replace theirs, ``--env``, ``--input`` and ``--output`` add to the file's
mappings (a name given both ways takes the flag's value), ``--secret`` adds to ``secrets`` and
``--port`` to ``ports``. Words after ``--`` follow a list ``run``, or are a script's ``$1``...
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from bourse.cli.offers import compute_kwargs, compute_named
from bourse.cli.run import given, option_fields, run_options, submit_job
from bourse.tasks import Task
from bourse.tasks.load import load_any
from bourse.tasks.spec import code_root, job_fields, refuse_service

SUFFIXES = (".yaml", ".yml")


def is_task_file(command: tuple[str, ...]) -> bool:
    return bool(command) and command[0].endswith(SUFFIXES) and Path(command[0]).is_file()


def run_task(path: Path, rest: tuple[str, ...], before: dict[str, Any]) -> None:
    """Load the task, apply the flags given ``before`` it and in ``rest``, submit it."""
    flags, args = split_args(rest)
    options = combine(before, parse_flags(flags))
    loaded = load_any(path)
    for note in loaded.notes:
        click.echo(f"bourse: note ({loaded.kind}): {note}", err=True)
    task = loaded.task
    refuse_service(task)
    fields = merge(task, job_fields(task, os.environ, args), options)
    command = fields.pop("command")
    code = None if options.get("no_code") else code_root(task, path)
    submit_job(command, fields, code, options, summary(task, args), base=path.parent,
               origins=loaded.origins)


def split_args(rest: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(flags, the words after ``--``)."""
    if "--" not in rest:
        return list(rest), []
    cut = rest.index("--")
    return list(rest[:cut]), list(rest[cut + 1:])


@click.command("run TASK.yaml", context_settings={"help_option_names": []})
@run_options
def _flags(**_: Any) -> None:
    """The flags that may follow a task file."""


def parse_flags(words: list[str]) -> dict[str, Any]:
    """The run flags in ``words`` (a stray word is a usage error: a task's command is its
    ``run``)."""
    try:
        with _flags.make_context("bourse run TASK.yaml", words) as ctx:
            return given(dict(ctx.params))
    except click.UsageError as exc:
        if "unexpected extra argument" not in exc.message:
            raise
        raise click.UsageError(f"{exc.message}: a task file's command is its run: field; "
                               "put arguments for it after --") from None


def combine(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The flags given before the file and after it: after wins, repeatable ones add up."""
    both = before | after
    for name in before.keys() & after.keys():
        if isinstance(before[name], tuple):
            both[name] = before[name] + after[name]
    return both


def merge(task: Task, fields: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The task's JobSpec fields with the flags' on top (module docstring)."""
    flagged = compute_kwargs(options)
    if "regions" in flagged:  # --region stands for every place the file names
        written = {k: v for k, v in task.resources.arguments().items() if k != "regions"}
    else:
        written = task.resources.arguments()
    flag = option_fields(options)
    merged = dict(fields)
    merged["compute"] = compute_named(written | flagged, set(flagged))
    for name in ("name", "max_retries", "pending_timeout_s", "checkpoint"):
        if flag[name] is not None:
            merged[name] = flag[name]
    for name in ("env", "inputs", "outputs"):
        merged[name] = {**(fields[name] or {}), **(flag[name] or {})} or None
    merged["project_secrets"] = list(dict.fromkeys(
        [*(fields["project_secrets"] or ()), *(flag["project_secrets"] or ())])) or None
    ports = {p.number: p for p in [*fields["ports"], *flag["ports"]]}
    merged["ports"] = list(ports.values())
    return merged


def summary(task: Task, args: list[str]) -> str:
    """What the job runs, in a line: setup's size and run's first line."""
    if isinstance(task.run, list):
        runs = " ".join([*task.run, *args])
    else:
        lines = [ln for ln in task.run.splitlines() if ln.strip()]
        runs = (lines[0] if lines else "") + (f" (+{len(lines) - 1} lines)" if len(lines) > 1
                                              else "")
    if task.setup is None:
        return f"run: {runs}"
    count = len([ln for ln in task.setup.splitlines() if ln.strip()])
    return f"setup: {count} line{'s' if count != 1 else ''}, then run: {runs}"
