"""An imported task's mounts: an input shown at the path a SkyPilot or dstack script reads.

A mount (SkyPilot's ``file_mounts``, dstack's ``files``) becomes an input, exactly like a
bourse task's ``inputs:`` — a store URI, or a local file or folder (read from the task file's
folder; absolute and ``~`` paths too) uploaded once by its content — and a line put first in
``setup`` that shows it at the mount's path. A path relative to the job's directory is a link
made there (`imported.link_line`). An absolute one (``/configs``) or one in the home
(``~/.ssh/id_rsa``) is made by `HELPER`, a bash function that makes the parent directories
and a symlink to the input's place (``$BOURSE_INPUT_<NAME>``, the attempt's own). It ends
setup with a line naming the field when it cannot:

- the job may not write there: a node that runs each job as a user of its own gives it its
  home, its directory and ``/tmp``, not ``/`` (in a container too: it runs as that user), so
  ``/configs`` is made only where the job's user may write ``/`` (an agent run as root with
  job users off) or the parent was made writable for jobs;
- something is there that is not a link it may replace: a file or folder of the node's (on a
  node where jobs share the agent's user, ``~/.ssh/id_rsa`` may be that user's key), or a
  link another running job made (``/configs`` is one path for every job of a shared user).
  A link whose place is gone (a finished attempt's) is replaced.

What can never be honoured is refused when the file is read (`problem`): the whole
filesystem or home, a path through ``..``, another user's home, and the system's own
directories (``/usr``, ``/etc``...), which a job does not change on a node it shares.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from bourse.storage.jobenv import input_var
from bourse.tasks.imported import Translation, data_name, link_line, relative_path

# the first part of a path a job never writes: the node's system, shared by every job on it
SYSTEM = frozenset({"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                    "run", "sbin", "sys", "usr", "var"})
INSTEAD = "mount it at another path (under ~, /tmp or relative to the workdir)"
CALL = "__bourse_mount"
HELPER = r"""__bourse_mount() {  # field, the input's place, the path the job reads
  local to="$3" at
  case "$to" in "~/"*) to="$HOME/${to#\~/}";; esac
  if [ -L "$to" ] && [ -e "$to" ] && [ "$(readlink -f -- "$to")" != "$(readlink -f -- "$2")" ]
  then echo "bourse: $1: $to is a link to $(readlink -- "$to") already (another job's?);" \
    "bourse does not replace it: mount at another path" >&2; return 1
  elif [ -e "$to" ] && [ ! -L "$to" ]; then
    echo "bourse: $1: $to exists already; bourse does not replace it: mount at another" \
      "path" >&2; return 1
  fi
  at=$(dirname -- "$to")
  if ! { mkdir -p -- "$at" && ln -sfn -- "$2" "$to"; } 2>/dev/null; then
    echo "bourse: $1: cannot make $to: the job's user may not write $at on this node;" \
      "mount it under ~ or relative to the workdir" >&2; return 1
  fi
}
"""


def problem(path: str) -> str | None:
    """Why a job can never be shown a mount at ``path``; None when it may be."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("~") and parts[0] != "~":
        return f"{path} is in another user's home"
    if ".." in parts:
        return f"{path} climbs out through ..: write the path the job reads"
    if parts in ([], ["~"]):
        return f"{path} is the whole {_whole(path)}"
    if path.startswith("/") and parts[0] in SYSTEM:
        return f"{path} is under /{parts[0]}, the node's system, which a job does not change"
    return None


def _whole(path: str) -> str:
    return {"/": "filesystem", "~": "home"}.get(path[:1], "directory of the job")


def mount(t: Translation, where: str, path: str, source: str) -> str | None:
    """Input ``source`` (a store URI or a local path) shown at ``path``: the setup line, or
    None when refused (``where`` names the field)."""
    why = problem(path)
    if why is not None:
        t.refuse(where, why, INSTEAD)
        return None
    inputs: dict[str, str] = t.mapping.setdefault("inputs", {})
    name = data_name(path, inputs)
    inputs[name] = source
    t.origins[name] = where
    t.note(where, _said(name, path, source))
    return link_line(name, path) if relative_path(path) else call_line(where, name, path)


def _said(name: str, path: str, source: str) -> str:
    where = " (read from the task file's folder)" if relative_path(source) else ""
    came = f"{source}{where} uploaded once by its content, " if "://" not in source else ""
    made = "" if relative_path(path) else (
        f"; setup fails naming this field where the job's user may not make {path} (a job "
        "user of its own may write its home and /tmp, not /)")
    return (f"input {name}: {came}prefetched before the job starts and linked at {path}; "
            f"it is read-only: results go in outputs{made}")


def call_line(where: str, name: str, path: str) -> str:
    """The setup line that makes the link at an absolute or ``~`` path, or ends setup."""
    return f'{CALL} {shlex.quote(where)} "${input_var(name)}" {shlex.quote(path)} || exit'


def script(lines: Iterable[str]) -> list[str]:
    """The mount lines, with `HELPER` defined first (and removed after) where one uses it."""
    lines = list(lines)
    if not any(line.startswith(CALL) for line in lines):
        return lines
    return [HELPER.rstrip("\n"), *lines, f"unset -f {CALL}"]
