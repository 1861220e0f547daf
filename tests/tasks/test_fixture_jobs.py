"""Every SkyPilot and dstack fixture as the job ``bourse run FILE --dry-run`` makes of it.

Each goes through the CLI's real path (read, detect, translate, validate, the flags merged,
the code packed, the plan printed with ``--json``) and is either a JobSpec the exchange takes
— the wire model's validation and the data plane's ``resolve_spec`` (``check_spec`` first),
as ``POST /jobs`` runs them, with local inputs given the URIs their upload would give them —
or refused with exit 2, each refused field named with its reason and what to write instead.

`EXPECTED` says which, for every fixture: a fixture added without an entry fails, and so does
a change in what a file becomes. `NEEDS` says what the submitting shell must give a file that
runs — the variables it leaves null and the local files it mounts — and what is refused,
field by name, when one is missing. The dry-run asks no exchange here (none is configured):
the shipped catalogues say what the market sells for it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from click.testing import CliRunner, Result
from task_fixtures import EXPECTED as TRANSLATED
from task_fixtures import ROOT, fixtures, name, translation

from bourse.cli.main import cli
from bourse.core.uri import parse_uri
from bourse.protocol.common import JobSpec
from bourse.sdk.inputs import local_input
from bourse.server.dataplane.plan import home_uri, resolve_spec

RUNS = "runs"
# fixture -> RUNS, or the fields refused (in the order the error lists them)
EXPECTED: dict[str, str | tuple[str, ...]] = {
    "skypilot/axolotl-docker.yaml": RUNS,
    "skypilot/custom_image.yaml": ("resources.image_id",),
    "skypilot/deepspeed-multinode.yaml": RUNS,
    "skypilot/disk_size.yaml": RUNS,
    "skypilot/distributed-pytorch-train.yaml": RUNS,
    "skypilot/docs-volumes.yaml": ("volumes",),
    "skypilot/echo_app.yaml": ("file_mounts./outputs",),
    "skypilot/env_check.yaml": RUNS,
    "skypilot/falcon-train.yaml": ("file_mounts./results",),
    "skypilot/gemma-serve.yaml": ("service",),
    "skypilot/gpt2-train.yaml": ("resources.any_of", "file_mounts.~/.cache/huggingface"),
    "skypilot/llama-3_1-lora.yaml": ("file_mounts./output",),
    "skypilot/llama3-serve.yaml": ("service", "resources.accelerators"),
    "skypilot/minimal.yaml": RUNS,
    "skypilot/tpuvm_mnist.yaml": ("resources.accelerators",),
    "skypilot/using_file_mounts.yaml": (
        "file_mounts./train-00001-of-01024", "file_mounts./data/train-00001-of-01024",
        "file_mounts.~/data/train-00001-of-01024"),
    "dstack/airflow-task.dstack.yml": RUNS,
    "dstack/deepseek-v2-nvcc.dstack.yml": ("nvcc",),
    "dstack/docs-docker-in-docker.dstack.yml": ("docker",),
    "dstack/docs-files.dstack.yml": RUNS,
    "dstack/docs-node-groups.dstack.yml": ("groups", "commands"),
    "dstack/docs-repos.dstack.yml": RUNS,
    "dstack/docs-resources.dstack.yml": RUNS,
    "dstack/docs-retry.dstack.yml": ("retry",),
    "dstack/docs-trl-sft.dstack.yml": RUNS,
    "dstack/docs-volumes.dstack.yml": ("volumes",),
    "dstack/http-server-service.dstack.yml": ("type",),
    "dstack/http-server-task.dstack.yml": RUNS,
    "dstack/jupyterlab.dstack.yml": RUNS,
    "dstack/optimum-tpu.dstack.yml": ("resources.gpu",),
    "dstack/qlora.dstack.yml": RUNS,
    "dstack/ray-cluster.dstack.yaml": RUNS,
    "dstack/spark-cluster.dstack.yaml": RUNS,
    "dstack/streamlit-task.dstack.yml": RUNS,
    "dstack/torchrun.dstack.yml": RUNS,
    "dstack/trl-amd.dstack.yml": RUNS,
    "dstack/trl-nvidia.dstack.yml": RUNS,
}


@dataclass(frozen=True)
class Needs:
    """What the submitting shell gives a file: ``env``, variables the file leaves null;
    ``files``, the local paths it reads — under ``~``, or beside it (a folder ends in ``/``)
    — each with the field refused without it."""

    env: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)


WANDB = Needs(env=("WANDB_API_KEY", "WANDB_PROJECT"))
NEEDS: dict[str, Needs] = {
    "skypilot/axolotl-docker.yaml": Needs(env=("HF_TOKEN",), files={"mistral/": "workdir"}),
    "skypilot/deepspeed-multinode.yaml": Needs(
        files={"~/.ssh/sky-key": "file_mounts.~/.ssh/id_rsa"}),
    "dstack/docs-files.dstack.yml": Needs(env=("HF_TOKEN",),
                                          files={"~/.ssh/id_rsa": "files[1]"}),
    "dstack/docs-repos.dstack.yml": Needs(env=("HF_TOKEN",)),
    "dstack/qlora.dstack.yml": Needs(env=("HF_TOKEN",)),
    "dstack/trl-amd.dstack.yml": WANDB,
    "dstack/trl-nvidia.dstack.yml": WANDB,
}
STORE = parse_uri("s3://bourse/")  # the exchange's bucket, as the data plane sees it
PROJECT = "p-fixtures"
PLAN_KEYS = {"submitted", "spec", "summary", "code", "source", "would_take", "offers",
             "explanation", "note"}
OFFER_KEYS = {"id", "provider", "instance_type", "node", "region", "zone", "gpu", "gpu_count",
              "cpus", "memory_gib", "price_per_hour", "spot"}
REFUSED_LINE = re.compile(r"^  (\S+): (.+) — (.+)$")  # "  field: reason — what instead"
PATHS = fixtures()


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A submitting shell with no exchange configured and a home of its own (returned)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "bourse"))
    for variable in ("BOURSE_URL", "BOURSE_TOKEN", "BOURSE_CONTEXT"):
        monkeypatch.delenv(variable, raising=False)
    for needs in NEEDS.values():
        for variable in needs.env:
            monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)  # the file's own folder counts, not where bourse runs
    return home


def give(fixture: str, home: Path, monkeypatch: pytest.MonkeyPatch,
         leave_out: str | None = None) -> Path:
    """The fixture copied, as it is, into a folder of the shell's, with what it needs there
    (but ``leave_out``); its path."""
    copy = home.parent / "tasks" / fixture
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes((ROOT / fixture).read_bytes())
    needs = NEEDS.get(fixture, Needs())
    for variable in needs.env:
        if variable != leave_out:
            monkeypatch.setenv(variable, f"value-of-{variable.lower()}")
    for path in needs.files:
        if path == leave_out:
            continue
        made = home / path[2:] if path.startswith("~/") else copy.parent / path
        if path.endswith("/"):
            made.mkdir(parents=True)
            (made / "train.py").write_text("print('its code')\n")
        else:
            made.parent.mkdir(parents=True, exist_ok=True)
            made.write_text("a local file the task mounts\n")
    return copy


def dry_run(path: Path) -> Result:
    return CliRunner().invoke(cli, ["run", "--dry-run", "--json", str(path)])


def refused_fields(stderr: str) -> list[str]:
    """The fields one refusal error lists, each checked to come with a reason and a fix."""
    lines = stderr.splitlines()
    assert lines[0].startswith("error: ") and "cannot run on bourse:" in lines[0], stderr
    found = [REFUSED_LINE.match(line.removesuffix(_TAIL)) for line in lines[1:]]
    assert all(found), stderr
    return [m.group(1) for m in found if m]


_TAIL = (" — change or remove them, or write a bourse task file (docs/tasks-import.md says "
         "what maps to what)")


def accepted(spec_json: dict[str, Any], job_id: str = "j-fixture") -> JobSpec:
    """The spec as the exchange would store it: parsed as ``POST /jobs`` parses it, each
    local input at the URI its upload gives it (below the project's home), resolved."""
    spec = JobSpec.model_validate(spec_json)
    home = str(home_uri(STORE, PROJECT))
    local = {n: local_input(n, unquote(urlparse(u).path), home, Path("/")).uri
             for n, u in spec.inputs.items() if u.startswith("file://")}
    spec = spec.model_copy(update={"inputs": spec.inputs | local})
    return resolve_spec(JobSpec.model_validate(spec.model_dump(mode="json")), job_id, STORE)


def test_every_fixture_has_an_entry_and_every_entry_a_fixture() -> None:
    assert [name(p) for p in PATHS] == sorted(EXPECTED)
    assert set(NEEDS) <= {k for k, v in EXPECTED.items() if v == RUNS}


def test_the_table_agrees_with_the_translations_table() -> None:
    """Every refusal of a job is its translator's: a file that translates is a job the
    exchange takes once its shell gives it what it needs (task_fixtures.EXPECTED)."""
    assert {k: v or RUNS for k, v in TRANSLATED.items()} == EXPECTED


@pytest.mark.parametrize("path", [p for p in PATHS if EXPECTED[name(p)] != RUNS],
                         ids=name)
def test_a_refused_file_names_each_field_and_submits_nothing(path: Path, shell: Path) -> None:
    result = dry_run(path)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # no plan: nothing would be submitted
    assert tuple(refused_fields(result.stderr)) == EXPECTED[name(path)]
    assert f"{path.name}: {len(EXPECTED[name(path)])} field(s) of this " in result.stderr


@pytest.mark.parametrize("path", [p for p in PATHS if EXPECTED[name(p)] == RUNS], ids=name)
def test_a_file_that_runs_is_a_job_the_exchange_takes(
        path: Path, shell: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = give(name(path), shell, monkeypatch)
    result = dry_run(copy)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert set(plan) == PLAN_KEYS and plan["submitted"] is False
    t = translation(path)
    spec = accepted(plan["spec"])
    assert spec.command[:2] == ["bash", "-c"] and spec.command[3] == "bourse-task"
    assert _exports(t.kind) in spec.command[2]  # what its scripts read is set
    assert set(spec.env) == set(t.mapping.get("env", {}))
    assert spec.compute.num_nodes == t.mapping.get("resources", {}).get("nodes", 1)
    assert set(spec.inputs) == set(t.mapping.get("inputs", {}))
    assert all(u.startswith("s3://bourse/projects/p-fixtures/inputs/")
               for n, u in spec.inputs.items() if "://" not in t.mapping["inputs"][n])
    if spec.compute.num_nodes > 1 or spec.inputs:  # a gang or data: a checkpoint of its own
        assert spec.checkpoint == "s3://bourse/jobs/j-fixture/checkpoints/"
    workdir = (copy.parent / t.mapping.get("workdir", ".")).resolve()
    assert plan["code"]["root"] == str(workdir) and plan["code"]["files"] >= 1
    assert plan["source"] == "catalogue" and set(plan["would_take"]) == OFFER_KEYS


def _exports(kind: str) -> str:
    return {"skypilot": "SKYPILOT_NODE_RANK", "dstack": "DSTACK_NODE_RANK"}[kind]


@pytest.mark.parametrize(("fixture", "missing"),
                         [(f, m) for f, n in NEEDS.items() for m in (*n.env, *n.files)],
                         ids=str)
def test_without_what_it_needs_a_file_is_refused_naming_it(
        fixture: str, missing: str, shell: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needs = NEEDS[fixture]
    result = dry_run(give(fixture, shell, monkeypatch, leave_out=missing))
    assert result.exit_code == 2 and result.stdout == ""
    error = result.stderr.splitlines()[-1]
    if missing in needs.env:
        assert error.startswith(f"error: env.{missing}: {missing} is null (copy it from "
                                "here) but not set here"), error
    elif needs.files[missing] == "workdir":
        assert error.startswith(f"error: workdir: {missing.rstrip('/')!r} is not a "
                                "directory"), error
    else:
        assert error.startswith(f"error: {needs.files[missing]}: {missing} is neither a "
                                "store URI nor a local path that exists"), error


# --- the command itself, as a user types it ------------------------------------------------

def bourse(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m bourse ARGS`` in a shell whose home is ``home``, with no exchange."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BOURSE_")}
    clean |= {"HOME": str(home), "BOURSE_HOME": str(home / ".bourse")}
    return subprocess.run([sys.executable, "-m", "bourse", *args], capture_output=True,
                          text=True, env=clean, timeout=60, check=False)


def test_the_cli_plans_a_two_node_skypilot_gang_as_json(tmp_path: Path) -> None:
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "sky-key").write_text("key\n")
    path = ROOT / "skypilot" / "deepspeed-multinode.yaml"
    done = bourse(tmp_path, "run", "--dry-run", "--json", str(path))
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert set(plan) == PLAN_KEYS
    assert plan["spec"]["compute"]["num_nodes"] == 2
    assert plan["spec"]["inputs"] == {"id_rsa": (tmp_path / ".ssh" / "sky-key").as_uri()}
    assert plan["summary"].startswith("setup: ")
    assert "bourse: note (skypilot): file_mounts.~/.ssh/id_rsa: input id_rsa" in done.stderr
    assert [set(o) for o in plan["offers"]] == [OFFER_KEYS] * len(plan["offers"])
    assert plan["would_take"] == plan["offers"][0] and plan["would_take"]["gpu"]
    assert plan["note"].startswith("no exchange to ask")
    accepted(plan["spec"])


def test_the_cli_plans_a_dstack_gpu_range_at_its_lower_end(tmp_path: Path) -> None:
    done = bourse(tmp_path, "run", "--dry-run", "--json", "--no-code",
                  str(ROOT / "dstack" / "docs-trl-sft.dstack.yml"))
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["code"] is None and plan["spec"]["bundle"] is None
    gpu = plan["spec"]["compute"]["gpu"]
    assert (gpu["requested"], gpu["count"]) == ("h100:1", 1)
    assert "dstack takes 1 to 2 GPUs; bourse asks for exactly 1" in done.stderr
    assert plan["would_take"]["gpu"].startswith("h100")


def test_the_cli_refuses_a_skypilot_volume_by_name_and_prints_no_plan(tmp_path: Path) -> None:
    done = bourse(tmp_path, "run", "--dry-run", "--json",
                  str(ROOT / "skypilot" / "docs-volumes.yaml"))
    assert (done.returncode, done.stdout) == (2, "")
    assert refused_fields(done.stderr) == ["volumes"]
    assert "bourse cp" in done.stderr
