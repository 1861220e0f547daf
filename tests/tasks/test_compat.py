"""`compat_exports` run by bash for real, with the environment bourse's runtime gives a gang
member and a single-node job, under ``set -u``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bourse.core.errors import InvalidInput
from bourse.tasks.compat import compat_exports

GANG = {"NODE_RANK": "1", "NNODES": "2", "NODE_IPS": "10.0.0.1\n10.0.0.2",
        "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "16",
        "GPUS_PER_NODE": "8", "BOURSE_JOB_ID": "j-42", "BOURSE_ATTEMPT": "1"}
NAMES = ("SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS", "SKYPILOT_NUM_NODES",
         "SKYPILOT_NUM_GPUS_PER_NODE", "SKYPILOT_TASK_ID", "SKYPILOT_SETUP_NODE_RANK",
         "SKYPILOT_SETUP_NODE_IPS", "DSTACK_NODE_RANK", "DSTACK_MASTER_NODE_IP",
         "DSTACK_NODES_NUM", "DSTACK_NODES_IPS", "DSTACK_GPUS_PER_NODE", "DSTACK_GPUS_NUM",
         "DSTACK_RUN_NAME", "DSTACK_MPI_HOSTFILE")


def seen(compat: str, env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The variables a script sees after the exports, read from a child process."""
    script = ("set -euo pipefail\n" + compat_exports(compat)
              + 'python3 -c "import json, os; print(json.dumps(dict(os.environ)))"\n'
              + "compgen -v | grep -c '^__bourse_' || true\n")
    base = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], env={**base, **env}, capture_output=True,
                          text=True, timeout=30, check=True, cwd=tmp_path)
    dumped, leftover = done.stdout.rsplit("\n", 2)[:2]
    assert leftover.strip() == "0"  # the helpers are unset
    variables: dict[str, str] = json.loads(dumped)
    return {k: v for k, v in variables.items() if k in NAMES}


def test_skypilot_variables_of_a_gang_member(tmp_path: Path) -> None:
    assert seen("skypilot", GANG, tmp_path) == {
        "SKYPILOT_NODE_RANK": "1", "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2",
        "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NUM_GPUS_PER_NODE": "8",
        "SKYPILOT_TASK_ID": "j-42", "SKYPILOT_SETUP_NODE_RANK": "1",
        "SKYPILOT_SETUP_NODE_IPS": "10.0.0.1\n10.0.0.2"}


def test_dstack_variables_of_a_gang_member(tmp_path: Path) -> None:
    got = seen("dstack", GANG, tmp_path)
    assert got == {
        "DSTACK_NODE_RANK": "1", "DSTACK_MASTER_NODE_IP": "10.0.0.1", "DSTACK_NODES_NUM": "2",
        "DSTACK_NODES_IPS": "10.0.0.1\n10.0.0.2", "DSTACK_GPUS_PER_NODE": "8",
        "DSTACK_GPUS_NUM": "16", "DSTACK_RUN_NAME": "j-42",
        "DSTACK_MPI_HOSTFILE": str(tmp_path / "dstack_mpi_hostfile")}
    assert (tmp_path / "dstack_mpi_hostfile").read_text() == (
        "10.0.0.1 slots=8\n10.0.0.2 slots=8\n")


def test_a_single_node_job_is_rank_0_of_one_node_with_its_visible_gpus(tmp_path: Path) -> None:
    env = {"BOURSE_JOB_ID": "j-7", "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"}
    assert seen("skypilot", env, tmp_path) == {
        "SKYPILOT_NODE_RANK": "0", "SKYPILOT_NODE_IPS": "127.0.0.1", "SKYPILOT_NUM_NODES": "1",
        "SKYPILOT_NUM_GPUS_PER_NODE": "2", "SKYPILOT_TASK_ID": "j-7",
        "SKYPILOT_SETUP_NODE_RANK": "0", "SKYPILOT_SETUP_NODE_IPS": "127.0.0.1"}


def test_a_cpu_job_has_no_gpus_and_a_hostfile_without_slots(tmp_path: Path) -> None:
    got = seen("dstack", {"BOURSE_JOB_ID": "j-8", "CUDA_VISIBLE_DEVICES": ""}, tmp_path)
    assert (got["DSTACK_GPUS_PER_NODE"], got["DSTACK_GPUS_NUM"]) == ("0", "0")
    assert got["DSTACK_MASTER_NODE_IP"] == "127.0.0.1"
    assert (tmp_path / "dstack_mpi_hostfile").read_text() == "127.0.0.1\n"


def test_the_master_is_the_first_address_when_master_addr_is_missing(tmp_path: Path) -> None:
    env = {"NODE_RANK": "0", "NNODES": "2", "NODE_IPS": "10.1.0.5\n10.1.0.6",
           "GPUS_PER_NODE": "1"}
    assert seen("dstack", env, tmp_path)["DSTACK_MASTER_NODE_IP"] == "10.1.0.5"


def test_bourse_exports_only_the_gang_defaults_and_an_unknown_compat_is_refused() -> None:
    assert "SKYPILOT" not in compat_exports("bourse")
    assert "DSTACK" not in compat_exports("bourse")
    assert compat_exports("skypilot").startswith(compat_exports("bourse"))
    with pytest.raises(InvalidInput, match="compat 'slurm'"):
        compat_exports("slurm")
