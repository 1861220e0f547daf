"""SkyPilot task YAMLs translated into bourse's format: the real files in
tests/fixtures/tasks/skypilot, then the shapes they do not cover, field by field."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from task_fixtures import EXPECTED, SKYPILOT, name, translation

from bourse.core.compute import Compute
from bourse.tasks import skypilot
from bourse.tasks.imported import Translation

FILES = sorted(p for p in SKYPILOT.glob("*.yaml"))


def sky(text: str) -> Translation:
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return skypilot.translate(data)


def refused(t: Translation) -> list[str]:
    return [r.field for r in t.refusals]


def test_there_are_a_dozen_real_files() -> None:
    assert len(FILES) >= 12


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_translates_or_is_refused_naming_its_fields(path: Any) -> None:
    t = translation(path)
    assert tuple(refused(t)) == EXPECTED[name(path)]
    if not t.refusals:  # what it became is a requirement a job can have
        Compute(**t.mapping.get("resources", {}))
        assert t.mapping["compat"] == "skypilot"
        assert isinstance(t.mapping["run"], str)


def test_a_two_node_torchrun_file_field_by_field() -> None:
    t = translation(SKYPILOT / "distributed-pytorch-train.yaml")
    assert t.mapping["resources"] == {"cpus": "4+", "gpu": "l4:1", "nodes": 2}
    assert t.mapping["name"] == "minGPT-ddp"
    assert t.mapping["setup"].startswith("git clone --depth 1 https://github.com/pytorch/examples")
    assert "--node_rank=${SKYPILOT_NODE_RANK}" in t.mapping["run"]
    assert set(t.mapping) == {"compat", "name", "resources", "setup", "run"}
    assert t.notes == []


def test_a_disk_and_a_cloud() -> None:
    t = translation(SKYPILOT / "disk_size.yaml")
    assert t.mapping["resources"] == {"providers": ["azure"], "disk": "512GB+"}
    assert t.mapping["run"] == "df -h\n"


def test_a_docker_workflow_keeps_its_workdir_and_asks_for_the_token() -> None:
    t = translation(SKYPILOT / "axolotl-docker.yaml")
    assert t.mapping["resources"] == {"gpu": "l4:1", "providers": ["gcp"]}
    assert t.mapping["workdir"] == "mistral"
    assert t.mapping["env"] == {"HF_TOKEN": None}
    assert any("HF_TOKEN must be set" in n for n in t.notes)
    assert any("~/sky_workdir is a link" in n for n in t.notes)


def test_refusals_say_why_and_what_instead() -> None:
    t = translation(SKYPILOT / "llama3-serve.yaml")
    service, accelerators = t.refusals
    assert "issue 20" in service.reason
    assert "l4:8" in accelerators.reason and "a100-80gb:2" in accelerators.reason
    assert "share one count" in accelerators.instead


@pytest.mark.parametrize(("written", "gpu"), [
    ("A100:8", "a100-40gb:8"),  # SkyPilot's A100 is the 40 GB part, not any A100
    ("A100-80GB:4", "a100-80gb:4"),
    ("H100", "h100-80gb:1"),
    ("L4", "l4:1"),
    ("T4:2", "t4:2"),
    ("'A10G:1'", "a10g:1"),
    ("{A100:8, H100:8}", "a100-40gb|h100-80gb:8"),
    ("['L4:1', 'A10G:1']", "l4|a10g:1"),
    ("{L4: 2, A10: 2}", "l4|a10:2"),
])
def test_accelerators(written: str, gpu: str) -> None:
    t = sky(f"resources:\n  accelerators: {written}\nrun: x")
    assert t.refusals == []
    assert t.mapping["resources"]["gpu"] == gpu
    Compute(t.mapping["resources"]["gpu"])


@pytest.mark.parametrize(("written", "says"), [
    ("Inferentia:1", "unknown GPU 'Inferentia'"),
    ("A100:0.5", "not a whole number"),
    ("{A100:8, H100:4}", "different counts"),
])
def test_accelerators_refused(written: str, says: str) -> None:
    t = sky(f"resources:\n  accelerators: {written}\nrun: x")
    assert refused(t) == ["resources.accelerators"]
    assert says in t.refusals[0].reason


def test_an_ordered_list_is_alternatives_with_a_note() -> None:
    t = sky("resources:\n  accelerators: [A100:1, V100:1]\nrun: x")
    assert t.mapping["resources"]["gpu"] == "a100-40gb|v100-16gb:1"
    assert any("in order" in n for n in t.notes)


def test_any_of_differing_only_in_accelerators_is_alternatives() -> None:
    t = sky("resources:\n  cpus: 8+\n  any_of:\n    - accelerators: H100:8\n"
            "    - accelerators: A100-80GB:8\nrun: x")
    assert t.refusals == []
    assert t.mapping["resources"] == {"cpus": "8+", "gpu": "h100-80gb|a100-80gb:8"}


def test_ordered_candidates_differing_in_place_are_refused() -> None:
    t = sky("resources:\n  accelerators: H100\n  ordered:\n    - infra: aws/us-east-1\n"
            "    - infra: aws/us-west-2\nrun: x")
    assert refused(t) == ["resources.ordered"]
    assert "infra" in t.refusals[0].reason


@pytest.mark.parametrize(("resources", "expected"), [
    ("cpus: 4+", {"cpus": "4+"}),
    ("memory: 32+", {"memory": "32GB+"}),
    ("memory: 1024MB+", {"memory": "1024MB+"}),
    ("disk_size: 256GB", {"disk": "256GB+"}),
    ("use_spot: true", {"spot": "only"}),
    ("use_spot: false", {"spot": "never"}),
    ("infra: aws/us-east-1/us-east-1a", {"providers": ["aws"],
                                         "regions": ["us-east-1", "us-east-1a"]}),
    ("infra: '*/eu-west-1'", {"regions": ["eu-west-1"]}),
    ("cloud: lambda\n  region: us-east-1", {"providers": ["lambda"], "regions": ["us-east-1"]}),
    ("image_id: docker:pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
     {"image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"}),
    ("max_hourly_cost: 2.5", {"max_price": 2.5}),
])
def test_resources(resources: str, expected: dict[str, Any]) -> None:
    t = sky(f"resources:\n  {resources}\nrun: x")
    assert t.refusals == []
    assert t.mapping["resources"] == expected
    Compute(**t.mapping["resources"])


def test_an_exact_count_becomes_a_minimum_and_says_so() -> None:
    t = sky("resources:\n  cpus: 16\n  memory: 64GB\nrun: x")
    assert t.mapping["resources"] == {"cpus": "16+", "memory": "64GB+"}
    assert [n.split(":")[0] for n in t.notes] == ["resources.cpus", "resources.memory"]


@pytest.mark.parametrize(("resources", "field"), [
    ("instance_type: p3.8xlarge", "resources.instance_type"),
    ("image_id: ami-0729d913a335efca7", "resources.image_id"),
    ("cloud: kubernetes", "resources.cloud"),
    ("infra: k8s/my-context", "resources.infra"),
    ("cloud: oci", "resources.cloud"),
    ("ports: 10052-10100", "resources.ports"),
    ("ports: 80", "resources.ports"),
    ("accelerator_args: {tpu_vm: true}", "resources.accelerator_args"),
    ("job_recovery: {strategy: FAILOVER, max_restarts_on_errors: 3}", "resources.job_recovery"),
    ("acelerators: A100", "resources.acelerators"),
])
def test_resources_refused_by_name(resources: str, field: str) -> None:
    t = sky(f"resources:\n  {resources}\nrun: x")
    assert refused(t) == [field]
    assert t.refusals[0].instead


def test_a_typo_suggests_the_field() -> None:
    t = sky("resources:\n  acelerators: A100\nrun: x")
    assert t.refusals[0].instead == "did you mean accelerators?"


def test_ports_are_the_tasks() -> None:
    t = sky("resources:\n  ports: [8080, 8081]\nrun: x")
    assert t.mapping["ports"] == [8080, 8081]


def test_envs_and_secrets() -> None:
    t = sky("envs:\n  MODEL: llama\n  EPOCHS: 3\n  HF_TOKEN:\nsecrets:\n  WANDB_API_KEY: null\n"
            "run: x")
    assert t.mapping["env"] == {"MODEL": "llama", "EPOCHS": "3", "HF_TOKEN": None}
    assert t.mapping["secrets"] == ["WANDB_API_KEY"]
    assert t.refusals == []


def test_a_secret_written_in_the_file_is_refused_without_its_value() -> None:
    t = sky("secrets:\n  HF_TOKEN: hf_abcdef123\nrun: x")
    assert refused(t) == ["secrets"]
    assert "hf_abcdef123" not in str(t.refusals[0])


def test_an_s3_mount_under_the_workdir_becomes_a_linked_input() -> None:
    t = sky("envs:\n  BUCKET: datasets\nfile_mounts:\n  data/digits: s3://${BUCKET}/digits/\n"
            "setup: pip install -r requirements.txt\nrun: ls data/digits")
    assert t.refusals == []
    assert t.mapping["inputs"] == {"digits": "s3://datasets/digits/"}
    link, rest = t.mapping["setup"].split("\n", 1)
    assert link == 'mkdir -p data && ln -sfn "$BOURSE_INPUT_DIGITS" data/digits'
    assert rest == "pip install -r requirements.txt"


def test_a_storage_mount_with_an_s3_source() -> None:
    t = sky("file_mounts:\n  ckpt:\n    source: s3://models/ckpt\n    mode: COPY\nrun: x")
    assert t.mapping["inputs"] == {"ckpt": "s3://models/ckpt"}
    assert t.mapping["setup"] == 'ln -sfn "$BOURSE_INPUT_CKPT" ckpt\n'


def test_a_local_source_becomes_a_local_input_linked_where_the_job_reads_it() -> None:
    t = sky("file_mounts:\n  data: ./local\n  /configs: ./configs\n  ~/.ssh/id_rsa: ~/.ssh/key\n"
            "setup: pip install x\nrun: x")
    assert t.refusals == []
    assert t.mapping["inputs"] == {"data": "./local", "configs": "./configs",
                                   "id_rsa": "~/.ssh/key"}
    lines = t.mapping["setup"].split("\n")
    assert lines[0].startswith("__bourse_mount() {")
    assert lines[-3:] == [
        """__bourse_mount 'file_mounts.~/.ssh/id_rsa' "$BOURSE_INPUT_ID_RSA" '~/.ssh/id_rsa' """
        "|| exit", "unset -f __bourse_mount", "pip install x"]
    assert 'ln -sfn "$BOURSE_INPUT_DATA" data' in lines
    assert """__bourse_mount file_mounts./configs "$BOURSE_INPUT_CONFIGS" /configs || exit""" \
        in lines
    assert any("uploaded once by its content" in n for n in t.notes)


def test_an_s3_mount_at_an_absolute_path() -> None:
    t = sky("file_mounts:\n  /data/digits: s3://datasets/digits/\nrun: x")
    assert t.refusals == [] and t.mapping["inputs"] == {"digits": "s3://datasets/digits/"}
    assert """__bourse_mount file_mounts./data/digits "$BOURSE_INPUT_DIGITS" /data/digits """ \
           "|| exit" in t.mapping["setup"]


def test_the_lora_file_mounts_its_local_configs_and_refuses_the_bucket() -> None:
    t = translation(SKYPILOT / "llama-3_1-lora.yaml")
    assert t.mapping["inputs"] == {"configs": "./configs"}
    assert "/configs || exit" in t.mapping["setup"]
    assert "file_mounts./output" in str(t.refusals[0])


@pytest.mark.parametrize(("mount", "says"), [
    ("/etc/hosts: s3://datasets/hosts", "under /etc, the node's system"),
    ("/usr/local/data: ./local", "under /usr"),
    ("'/': ./local", "the whole filesystem"),
    ("'~': ./local", "the whole home"),
    ("~root/.ssh: ./local", "another user's home"),
    ("../up: ./local", "climbs out"),
    ("data: gs://bucket/x", "gs:// store"),
    ("data: r2://bucket/x", "S3-compatible"),
    ("data: {name: my-bucket, mode: MOUNT}", "creates or mounts by name"),
    ("data: {name: vol, store: volume}", "SkyPilot volume"),
    ("data: s3://${NOWHERE}/x", "no value in envs"),
])
def test_mounts_refused(mount: str, says: str) -> None:
    t = sky(f"file_mounts:\n  {mount}\nrun: x")
    assert len(t.refusals) == 1 and t.refusals[0].field.startswith("file_mounts.")
    assert says in t.refusals[0].reason


@pytest.mark.parametrize("field", ["service: {readiness_probe: /}", "config: {docker: {}}",
                                   "workdir: {url: 'https://github.com/a/b'}", "pool: {}"])
def test_top_level_fields_refused(field: str) -> None:
    t = sky(f"{field}\nrun: x")
    assert refused(t) == [field.split(":", maxsplit=1)[0]]


def test_a_file_without_run_is_refused() -> None:
    assert refused(sky("setup: echo hi")) == ["run"]


def test_hints_are_noted_not_refused() -> None:
    t = sky("resources:\n  disk_tier: best\n  labels: {team: a}\n  autostop: 10m\nrun: x")
    assert t.refusals == []
    assert [n.split(":")[0] for n in t.notes] == ["resources.disk_tier", "resources.labels",
                                                  "resources.autostop"]
