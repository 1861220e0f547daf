"""dstack ``.dstack.yml`` tasks translated into bourse's format: the real files in
tests/fixtures/tasks/dstack, then the shapes they do not cover, field by field."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml
from task_fixtures import DSTACK, EXPECTED, name, runnable_on_cpu, translation

from bourse.core.compute import Compute
from bourse.tasks import dstack
from bourse.tasks.imported import Translation

FILES = sorted(p for p in DSTACK.glob("*.dstack.y*ml"))


def dst(text: str) -> Translation:
    data = yaml.safe_load("type: task\n" + text)
    assert isinstance(data, dict)
    return dstack.translate(data)


def refused(t: Translation) -> list[str]:
    return [r.field for r in t.refusals]


def test_there_are_eight_real_files_and_every_one_is_expected() -> None:
    assert len(FILES) >= 8
    assert {name(p) for p in FILES} == {k for k in EXPECTED if k.startswith("dstack/")}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_translates_or_is_refused_naming_its_fields(path: Any) -> None:
    t = translation(path)
    assert tuple(refused(t)) == EXPECTED[name(path)]
    if not t.refusals:
        Compute(**t.mapping.get("resources", {}))
        assert t.mapping["compat"] == "dstack"


def test_a_two_node_torchrun_file_field_by_field() -> None:
    t = translation(DSTACK / "torchrun.dstack.yml")
    assert t.mapping["resources"] == {"nodes": 2, "gpu": "gpu:1"}
    assert t.mapping["env"] == {"NCCL_DEBUG": "INFO"}
    assert t.mapping["name"] == "train-distrib"
    commands = t.mapping["run"].split(" &&\n")
    assert commands[0] == ("git clone https://github.com/pytorch/examples.git "
                           "pytorch-examples")
    assert "--master-addr=$DSTACK_MASTER_NODE_IP" in commands[3]
    assert [n.split(":")[0] for n in t.notes] == ["python", "resources.gpu",
                                                  "resources.shm_size"]


def test_the_documented_resources_field_by_field() -> None:
    t = translation(DSTACK / "docs-resources.dstack.yml")
    assert t.mapping["resources"] == {"cpus": "16+", "memory": "200GB+",
                                      "gpu": "40GB..80GB:4", "disk": "500GB+"}


def test_an_amd_image_task() -> None:
    t = translation(DSTACK / "trl-amd.dstack.yml")
    assert t.mapping["resources"] == {
        "image": "rocm/pytorch:rocm6.2.3_ubuntu22.04_py3.10_pytorch_release_2.3.0",
        "gpu": "mi300x:1", "disk": "150GB+"}
    assert t.mapping["env"]["WANDB_API_KEY"] is None


def test_a_background_command_is_braced_as_dstack_does() -> None:
    t = translation(DSTACK / "qlora.dstack.yml")
    assert t.mapping["run"].split(" &&\n") == [
        "pip install -r requirements.txt", "{ tensorboard --logdir results/runs & }",
        "python train.py --merge_and_push "]


def test_the_joined_commands_stop_at_the_first_failure() -> None:
    t = dst("commands:\n  - echo one\n  - sleep 0 &\n  - 'false'\n  - echo never")
    done = subprocess.run(["bash", "-c", t.mapping["run"]], capture_output=True, text=True,
                          timeout=30, check=False)
    assert (done.returncode, done.stdout) == (1, "one\n")


@pytest.mark.parametrize(("gpu", "expected"), [
    ("A100", "a100:1"),  # dstack's A100 is any A100
    ("A100:80GB:2", "a100|80GB+:2"),
    ("A10G,A100", "a10g|a100:1"),
    ("24GB..80GB:2", "24GB..80GB:2"),
    ("40GB..", "40GB+:1"),
    ("H100:1..2", "h100:1"),
    ("1..8", "gpu:1"),
    ("nvidia:2", "cuda:2"),
    ("amd", "mi25|mi300x:1"),
    (2, "gpu:2"),
    ("{name: [H100, H200], count: 8}", "h100|h200:8"),
])
def test_gpus(gpu: Any, expected: str) -> None:
    t = dst(f"commands: [x]\nresources:\n  gpu: {gpu}")
    assert t.refusals == []
    assert t.mapping["resources"]["gpu"] == expected
    Compute(expected)


@pytest.mark.parametrize(("gpu", "says"), [
    ("v5litepod-8", "unknown GPU"),
    ("tpu", "tpu accelerators"),
    ("{name: A100, compute_capability: 8.0}", "compute capability"),
    ("A100:two", "unknown GPU"),
])
def test_gpus_refused(gpu: str, says: str) -> None:
    t = dst(f"commands: [x]\nresources:\n  gpu: {gpu}")
    assert t.refusals and t.refusals[0].field.startswith("resources.gpu")
    assert says in t.refusals[0].reason


@pytest.mark.parametrize(("written", "expected"), [
    ("cpu: 16..", {"cpus": "16+"}),
    ("cpu: x86:8..32", {"cpus": "8..32"}),
    ("cpu: {min: 4}", {"cpus": "4+"}),
    ("memory: 8GB..64GB", {"memory": "8GB..64GB"}),
    ("memory: ..64GB", {"memory": "..64GB"}),
    ("disk: 100GB..", {"disk": "100GB+"}),
])
def test_resources(written: str, expected: dict[str, Any]) -> None:
    t = dst(f"commands: [x]\nresources:\n  {written}")
    assert t.refusals == []
    assert t.mapping["resources"] == expected
    Compute(**expected)


def test_arm_cpus_are_refused() -> None:
    assert refused(dst("commands: [x]\nresources:\n  cpu: arm:8")) == ["resources.cpu"]


@pytest.mark.parametrize(("written", "expected"), [
    ("spot_policy: auto", {"spot": "prefer"}),
    ("spot_policy: spot", {"spot": "only"}),
    ("backends: [aws, vastai]", {"providers": ["aws", "vast"]}),
    ("regions: [eu-west-1]\navailability_zones: [eu-west-1a]",
     {"regions": ["eu-west-1", "eu-west-1a"]}),
    ("max_price: 1.5", {"max_price": 1.5}),
])
def test_profile_fields(written: str, expected: dict[str, Any]) -> None:
    t = dst(f"commands: [x]\n{written}")
    assert t.refusals == []
    assert t.mapping["resources"] == expected


def test_env_as_a_mapping_and_ports_with_a_local_port() -> None:
    t = dst("commands: [x]\nenv: {A: '1', B: null}\nports: ['8080:8000', 6006]")
    assert t.mapping["env"] == {"A": "1", "B": None}
    assert t.mapping["ports"] == [8000, 6006]
    assert any("no local port" in n for n in t.notes)


def test_the_documented_files_become_inputs_linked_at_their_paths() -> None:
    t = translation(DSTACK / "docs-files.dstack.yml")
    assert t.refusals == []
    assert t.mapping["inputs"] == {"examples": ".", "id_rsa": "~/.ssh/id_rsa"}
    lines = t.mapping["setup"].split("\n")
    assert 'ln -sfn "$BOURSE_INPUT_EXAMPLES" examples' in lines
    assert """__bourse_mount 'files[1]' "$BOURSE_INPUT_ID_RSA" /root/.ssh/id_rsa || exit""" \
        in lines


@pytest.mark.parametrize(("written", "inputs", "line"), [
    ("[train.py]", {}, None),
    ("[../shared/data.csv:data.csv]", {"data_csv": "../shared/data.csv"},
     'ln -sfn "$BOURSE_INPUT_DATA_CSV" data.csv'),
    ("[~/.netrc]", {"netrc": "~/.netrc"}, "'~/.netrc' || exit"),
    ("[{local_path: /srv/w, path: /weights}]", {"weights": "/srv/w"}, "/weights || exit"),
])
def test_files(written: str, inputs: dict[str, str], line: str | None) -> None:
    t = dst(f"commands: [x]\nfiles: {written}")
    assert t.refusals == [] and t.mapping.get("inputs", {}) == inputs
    if line is None:
        assert "setup" not in t.mapping
    else:
        assert line in t.mapping["setup"]


@pytest.mark.parametrize(("written", "says"), [
    ("files: train.py", "must be a list"),
    ("files: ['../x']", "climbs out"),
    ("files: ['./a:/etc/a']", "under /etc"),
])
def test_files_refused(written: str, says: str) -> None:
    t = dst(f"commands: [x]\n{written}")
    assert refused(t)[0].startswith("files") and says in t.refusals[0].reason


@pytest.mark.parametrize(("written", "field"), [
    ("privileged: true", "privileged"),
    ("user: ubuntu", "user"),
    ("working_dir: /workflow", "working_dir"),
    ("registry_auth: {username: a, password: b}", "registry_auth"),
    ("schedule: {cron: '0 * * * *'}", "schedule"),
    ("startup_order: workers-first", "startup_order"),
    ("stop_criteria: master-done", "stop_criteria"),
    ("shell: /usr/bin/zsh", "shell"),
    ("retry: true", "retry"),
    ("repos: ['https://github.com/dstackai/dstack']", "repos"),
    ("repos: ['..:/my-repo']", "repos"),
    ("comands: [x]", "comands"),
])
def test_fields_refused_by_name(written: str, field: str) -> None:
    t = dst(f"commands: [x]\n{written}")
    assert refused(t) == [field]
    assert t.refusals[0].instead


def test_an_interpolation_other_than_run_args_is_refused() -> None:
    t = dst("commands: ['ray start --address=${{ groups[0].nodes[0].IP_ADDRESS }}:6379']")
    assert refused(t) == ["commands"]
    assert "groups[0].nodes[0].IP_ADDRESS" in t.refusals[0].reason


def test_retry_on_interruption_only_is_what_bourse_does() -> None:
    t = dst("commands: [x]\nretry: {on_events: [interruption, no-capacity]}")
    assert t.refusals == [] and any(n.startswith("retry:") for n in t.notes)


@pytest.mark.parametrize(("kind", "says"), [("service", "issue 20"),
                                            ("dev-environment", "dev environment"),
                                            ("fleet", "not a run configuration")])
def test_other_types_are_refused(kind: str, says: str) -> None:
    t = dstack.translate({"type": kind, "commands": ["x"]})
    assert refused(t) == ["type"] and says in t.refusals[0].reason


def test_the_cpu_runnable_helper_finds_the_airflow_task() -> None:
    assert "dstack/airflow-task.dstack.yml" in [name(p) for p in runnable_on_cpu()]
    assert "dstack/torchrun.dstack.yml" not in [name(p) for p in runnable_on_cpu()]
