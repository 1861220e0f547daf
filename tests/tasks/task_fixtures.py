"""The SkyPilot and dstack fixture files, what each must give, and which run on a CPU exchange.

`EXPECTED` lists every fixture: the exact fields it is refused for, or ``()`` when it
translates. `cpu_runnable` says which translated ones an end-to-end test can run on an exchange
of CPU nodes without a network (the lead's end-to-end runs use it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from bourse.tasks.detect import detect, translate_as
from bourse.tasks.imported import Translation

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"
SKYPILOT = ROOT / "skypilot"
DSTACK = ROOT / "dstack"

# fixture -> the fields refused, in the order the translator reads them; () = translates
EXPECTED: dict[str, tuple[str, ...]] = {
    "skypilot/distributed-pytorch-train.yaml": (),
    "skypilot/disk_size.yaml": (),
    "skypilot/minimal.yaml": (),
    "skypilot/env_check.yaml": (),
    "skypilot/axolotl-docker.yaml": (),
    "skypilot/custom_image.yaml": ("resources.image_id",),
    "skypilot/deepspeed-multinode.yaml": (),
    "skypilot/echo_app.yaml": ("file_mounts./outputs",),
    "skypilot/falcon-train.yaml": ("file_mounts./results",),
    "skypilot/gemma-serve.yaml": ("service",),
    "skypilot/gpt2-train.yaml": ("resources.any_of", "file_mounts.~/.cache/huggingface"),
    "skypilot/llama-3_1-lora.yaml": ("file_mounts./output",),
    "skypilot/llama3-serve.yaml": ("service", "resources.accelerators"),
    "skypilot/tpuvm_mnist.yaml": ("resources.accelerators",),
    "skypilot/docs-volumes.yaml": ("volumes",),
    "skypilot/using_file_mounts.yaml": (  # gs:// sources; its local and s3:// ones translate
        "file_mounts./train-00001-of-01024", "file_mounts./data/train-00001-of-01024",
        "file_mounts.~/data/train-00001-of-01024"),
    "dstack/airflow-task.dstack.yml": (),
    "dstack/docs-repos.dstack.yml": (),
    "dstack/docs-resources.dstack.yml": (),
    "dstack/docs-trl-sft.dstack.yml": (),
    "dstack/http-server-task.dstack.yml": (),
    "dstack/jupyterlab.dstack.yml": (),
    "dstack/qlora.dstack.yml": (),
    "dstack/ray-cluster.dstack.yaml": (),
    "dstack/spark-cluster.dstack.yaml": (),
    "dstack/streamlit-task.dstack.yml": (),
    "dstack/torchrun.dstack.yml": (),
    "dstack/trl-amd.dstack.yml": (),
    "dstack/trl-nvidia.dstack.yml": (),
    "dstack/docs-files.dstack.yml": (),
    "dstack/deepseek-v2-nvcc.dstack.yml": ("nvcc",),
    "dstack/docs-docker-in-docker.dstack.yml": ("docker",),
    "dstack/docs-node-groups.dstack.yml": ("groups", "commands"),
    "dstack/docs-retry.dstack.yml": ("retry",),
    "dstack/docs-volumes.dstack.yml": ("volumes",),
    "dstack/http-server-service.dstack.yml": ("type",),
    "dstack/optimum-tpu.dstack.yml": ("resources.gpu",),
}
# what a job on a CPU exchange without a network cannot do
_NEEDS_NETWORK = re.compile(r"\b(pip3? install|uv pip|git clone|wget|curl|apt(-get)? |conda "
                            r"create|docker (pull|build|run))")


def fixtures() -> list[Path]:
    return sorted(p for p in ROOT.glob("*/*") if p.suffix in (".yml", ".yaml"))


def name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def translation(path: Path) -> Translation:
    data = load(path)
    return translate_as(detect(data, path.name), data)


def cpu_runnable(path: Path) -> tuple[bool, str]:
    """Whether the fixture's translation runs to its end on CPU nodes with no network, and
    why not. Needs: no refusal, no GPU, no image, no provider or region, no port (a server
    that never exits), no variable the submitting shell must give, no network command, and
    no SkyPilot path below ~/sky_workdir that is not in the fixture's directory, no input
    from a store or from local files the fixture's directory lacks."""
    t = translation(path)
    resources = t.mapping.get("resources", {})
    scripts = f"{t.mapping.get('setup', '')}\n{t.mapping.get('run', '')}"
    reasons = ["refused"] if t.refusals else []
    reasons += [f"needs {k}" for k in ("gpu", "image", "providers", "regions") if k in resources]
    reasons += ["serves a port"] if t.mapping.get("ports") else []
    if any(v is None for v in t.mapping.get("env", {}).values()):
        reasons.append("needs variables from the shell")
    reasons += ["needs the network"] if _NEEDS_NETWORK.search(scripts) else []
    reasons += ["reads ~/sky_workdir/<repo>"] if "sky_workdir/" in scripts else []
    reasons += [_input_reason(path, v) for v in t.mapping.get("inputs", {}).values()]
    reasons = [r for r in reasons if r]
    return not reasons, ", ".join(reasons)


def _input_reason(path: Path, source: str) -> str:
    if "://" in source:
        return "reads a store"
    return "" if (path.parent / Path(source).expanduser()).exists() else "needs local files"


def runnable_on_cpu() -> list[Path]:
    """The fixtures an end-to-end test can submit to a CPU exchange and expect to succeed."""
    return [p for p in fixtures() if cpu_runnable(p)[0]]
