"""The variables a SkyPilot or dstack script reads, made from bourse's own.

`compat_exports` returns bash lines for the job's wrapper to run before ``setup`` and ``run``.
They read what bourse's runtime sets for a gang (``MASTER_ADDR``, ``NODE_RANK``, ``NNODES``,
``NODE_IPS`` one address a line in rank order, ``GPUS_PER_NODE``) and for every job
(``BOURSE_JOB_ID``); a single-node job may lack the gang ones, so they default to rank 0 of
one node at 127.0.0.1, with as many GPUs as ``CUDA_VISIBLE_DEVICES`` lists. Every expansion has
a default, so the lines run under ``set -u``; the helpers they use are unset at the end.
Every compat, bourse's own included, first gets the gang variables defaulted (``BOURSE``), so a
script written for a gang runs alone unchanged; MASTER_ADDR and MASTER_PORT are left unset
there: a port chosen here could be another job's on the same node.

Formats, from SkyPilot's and dstack's documentation: SkyPilot's ``SKYPILOT_NODE_IPS`` and
dstack's ``DSTACK_NODES_IPS`` hold one IP a line, in rank order; ``SKYPILOT_TASK_ID`` stays the
same across a managed job's recoveries, as the bourse job id does across attempts;
``DSTACK_GPUS_NUM`` counts the GPUs of every node; ``DSTACK_MPI_HOSTFILE`` names a file of
``<ip> slots=<gpus>`` lines (``<ip>`` alone on nodes without GPUs). SkyPilot syncs the workdir
to ``~/sky_workdir``: a SkyPilot task gets that name as a link to its code directory, unless
``~/sky_workdir`` already exists (a job without a home of its own may find another's there).
"""

from __future__ import annotations

from bourse.core.errors import InvalidInput

COMPATS = ("bourse", "skypilot", "dstack")

BOURSE = """\
if [ -z "${GPUS_PER_NODE+x}" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    GPUS_PER_NODE=$(IFS=,; set -- $CUDA_VISIBLE_DEVICES; echo $#)
  else GPUS_PER_NODE=0; fi
fi
: "${NODE_RANK:=0}" "${NNODES:=1}" "${NODE_IPS:=127.0.0.1}"
: "${WORLD_SIZE:=$(( NNODES * (GPUS_PER_NODE > 0 ? GPUS_PER_NODE : 1) ))}"
export GPUS_PER_NODE NODE_RANK NNODES NODE_IPS WORLD_SIZE
"""

# after BOURSE, which has defaulted the gang variables (GPUS_PER_NODE counted there)
_BASE = r"""__bourse_rank="${NODE_RANK:-0}"
__bourse_nodes="${NNODES:-1}"
__bourse_ips="${NODE_IPS:-${MASTER_ADDR:-127.0.0.1}}"
__bourse_master="${MASTER_ADDR:-${__bourse_ips%%$'\n'*}}"
__bourse_gpus="${GPUS_PER_NODE:-0}"
"""

_SKYPILOT = r"""export SKYPILOT_NODE_RANK="$__bourse_rank"
export SKYPILOT_NODE_IPS="$__bourse_ips"
export SKYPILOT_NUM_NODES="$__bourse_nodes"
export SKYPILOT_NUM_GPUS_PER_NODE="$__bourse_gpus"
export SKYPILOT_TASK_ID="${BOURSE_JOB_ID:-}"
export SKYPILOT_SETUP_NODE_RANK="$__bourse_rank"
export SKYPILOT_SETUP_NODE_IPS="$__bourse_ips"
if [ -n "${HOME:-}" ] && [ ! -e "$HOME/sky_workdir" ]; then
  ln -sfn "$PWD" "$HOME/sky_workdir" 2>/dev/null || true
fi
"""

_DSTACK = r"""export DSTACK_NODE_RANK="$__bourse_rank"
export DSTACK_MASTER_NODE_IP="$__bourse_master"
export DSTACK_NODES_NUM="$__bourse_nodes"
export DSTACK_NODES_IPS="$__bourse_ips"
export DSTACK_GPUS_PER_NODE="$__bourse_gpus"
export DSTACK_GPUS_NUM=$(( __bourse_gpus * __bourse_nodes ))
export DSTACK_RUN_NAME="${BOURSE_JOB_ID:-}"
export DSTACK_WORKING_DIR="$PWD"
export DSTACK_MPI_HOSTFILE="${TMPDIR:-/tmp}/dstack_mpi_hostfile"
while IFS= read -r __bourse_ip; do
  if [ "$__bourse_gpus" -gt 0 ]; then
    printf '%s slots=%s\n' "$__bourse_ip" "$__bourse_gpus"
  else
    printf '%s\n' "$__bourse_ip"
  fi
done <<< "$__bourse_ips" > "$DSTACK_MPI_HOSTFILE"
unset __bourse_ip
"""

_END = "unset __bourse_rank __bourse_nodes __bourse_ips __bourse_master __bourse_gpus\n"


def compat_exports(compat: str) -> str:
    """Bash lines exporting the gang variables' defaults and ``compat``'s own variables."""
    if compat == "bourse":
        return BOURSE
    exports = {"skypilot": _SKYPILOT, "dstack": _DSTACK}.get(compat)
    if exports is None:
        raise InvalidInput(f"compat {compat!r} is not one of {', '.join(COMPATS)}",
                           field="compat", hint="write compat: bourse, skypilot or dstack")
    return "".join((BOURSE, f"# the variables {compat} scripts read, from bourse's\n", _BASE,
                    exports,
                    _END))
