"""The variables a task's ``run`` sees, per ``compat``: bash lines its wrapper runs first.

Minimal: bourse's own mapping, for every compat (the SkyPilot and dstack mappings come with
their importers, issue 21 part 2). A gang's members already have MASTER_ADDR, MASTER_PORT,
NODE_RANK, NNODES, WORLD_SIZE, NODE_IPS and GPUS_PER_NODE from the agent; a single-node job
gets them defaulted here (rank 0 of one node, at 127.0.0.1, with the GPUs it was given), so a
script written for a gang runs alone unchanged. MASTER_ADDR and MASTER_PORT are left unset
there: a port chosen here could be another job's on the same node.
"""

from __future__ import annotations

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


def compat_exports(compat: str) -> str:
    """Bash lines that export what ``run`` expects under ``compat`` (bourse, skypilot,
    dstack): here bourse's for all three."""
    return BOURSE
