"""A task's command: one bash that exports its compat variables, runs ``setup``, then ``run``.

    ["bash", "-c", WRAPPER, "bourse-task", *ARGV]

Setup and run share one shell, so what setup exports, activates (``source .venv/bin/activate``)
or defines is there for run; ``~/.bashrc``, when there is one, is sourced between them, so a
line setup adds to it (``conda init``, ``echo 'export X=1' >> ~/.bashrc``) counts too, as
SkyPilot's users expect. Setup runs with ``set -e``: its first failing command ends the job
with that command's exit code and ``bourse: setup failed (exit N)`` on stderr, and run never
starts. Run then runs without ``set -e``, as ``bash -c`` runs a script: its exit code is the
job's.

Both scripts travel as shell-quoted values ``eval``'d in place, never pasted into the wrapper:
a setup that ends inside a here-document or a quote cannot swallow the lines after it. A list
``run`` is an argv, run by ``exec "$@"`` (its words are never re-read by a shell); words given
after ``--`` on the command line follow it, or are ``$1``, ``$2``... of a script ``run``.

A task imported from SkyPilot or dstack (``compat`` other than bourse) runs setup as those
systems do instead: a bash script of its own, so an ``exit`` in it ends setup only and just
what it writes (``~/.bashrc``, files) reaches run; a non-zero exit still ends the job.

On a gang, every member runs the same command: setup runs once on each node, before run, on
every rank, each attempt. It is not cached between attempts (docs/tasks.md says why);
``resources.packages`` is: its virtualenv is built once per node.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from bourse.tasks.compat import compat_exports
from bourse.tasks.model import Task

ARGV0 = "bourse-task"  # $0 of the wrapper
# the EXIT trap is armed only while setup runs: it says why the job ended there
SETUP = """\
__bourse_phase=setup
trap '__bourse_s=$?; if [ "$__bourse_phase" = setup ]; then if [ "$__bourse_s" = 0 ]; then \
echo "bourse: setup ended the job (exit 0) before run started: an exit in setup ends the \
whole job" >&2; __bourse_s=1; else echo "bourse: setup failed (exit $__bourse_s)" >&2; fi; \
exit "$__bourse_s"; fi' EXIT
set -e
eval "$__bourse_setup"
set +e
__bourse_phase=run
trap - EXIT
"""
# SkyPilot and dstack run setup as a script of its own: an ``exit`` in it ends setup, not the
# job, and only what it writes (``~/.bashrc``, files) reaches run, never its exports
APART = """\
bash -c "$__bourse_setup" bourse-setup || { __bourse_s=$?; \
echo "bourse: setup failed (exit $__bourse_s)" >&2; exit "$__bourse_s"; }
"""
BASHRC = 'if [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi\n'


def command(task: Task, args: Sequence[str] = ()) -> list[str]:
    """The job's argv: bash with the wrapper, then the run argv (or ``args``, a script's)."""
    argv = [*task.run, *args] if isinstance(task.run, list) else list(args)
    return ["bash", "-c", wrapper(task), ARGV0, *argv]


def wrapper(task: Task) -> str:
    """The wrapper script: compat exports, setup under ``set -e``, ``~/.bashrc``, run."""
    parts = [compat_exports(task.compat)]
    if task.setup is not None:
        apart = task.compat != "bourse"
        parts += [f"__bourse_setup={shlex.quote(task.setup)}\n", APART if apart else SETUP]
    parts.append(BASHRC)
    if isinstance(task.run, list):
        parts.append('exec "$@"\n')
    else:
        parts += [f"__bourse_run={shlex.quote(task.run)}\n", 'eval "$__bourse_run"\n']
    return "".join(parts)
