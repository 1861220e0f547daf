"""Mounts of imported tasks: which paths are refused when the file is read, and, run by real
bash through the job's wrapper in a temporary HOME, that a SkyPilot script reads an input at
its absolute or ``~`` path, and that setup fails naming the field where the link cannot be
made or would replace something."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from bourse.tasks import skypilot, task_from_mapping
from bourse.tasks.mounts import problem
from bourse.tasks.wrap import command

BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


@pytest.mark.parametrize(("path", "says"), [
    ("data", None), ("./data/x", None), ("/data", None), ("/tmp/workdir", None),
    ("~/.cache/huggingface", None), ("/root/.ssh/id_rsa", None), ("/opt/w", None),
    ("/", "whole filesystem"), ("~", "whole home"), ("~/", "whole home"),
    (".", "whole directory of the job"), ("~bob/x", "another user's home"),
    ("/data/../etc/passwd", "climbs out"), ("../x", "climbs out"),
    ("/etc/x", "under /etc"), ("/usr/share/x", "under /usr"), ("/proc/1", "under /proc"),
    ("/var/lib/x", "under /var"),
])
def test_which_paths_a_mount_may_have(path: str, says: str | None) -> None:
    found = problem(path)
    assert found is None if says is None else (found is not None and says in found)


def wrapped(tmp_path: Path, mounts: str, run: str, inputs: dict[str, Path],
            setup: str = "") -> subprocess.CompletedProcess[str]:
    """The SkyPilot task's command run as a job sees it: in its own directory, with HOME and
    each input's ``BOURSE_INPUT_<NAME>`` set, as the agent sets them."""
    text = f"file_mounts:\n{mounts}\nrun: |\n  {run}\n" + (f"setup: {setup}\n" if setup else "")
    t = skypilot.translate(yaml.safe_load(text))
    assert t.refusals == [], t.refusals
    job = tmp_path / "job"
    job.mkdir(exist_ok=True)
    (tmp_path / "home").mkdir(exist_ok=True)
    env = {**BASE_ENV, "HOME": str(tmp_path / "home"),
           **{f"BOURSE_INPUT_{n.upper()}": str(p) for n, p in inputs.items()}}
    return subprocess.run(command(task_from_mapping(t.mapping)), cwd=job, env=env,
                          capture_output=True, text=True, timeout=30, check=False)


def data(tmp_path: Path) -> Path:
    folder = tmp_path / "attempt" / "inputs" / "configs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "8B-lora.yaml").write_text("lr: 1e-4\n")
    return folder


def test_a_script_reads_the_input_at_its_absolute_and_home_paths(tmp_path: Path) -> None:
    absolute = tmp_path / "abs" / "configs"
    done = wrapped(tmp_path, f"  {absolute}: ./configs\n  ~/.cache/cfg: ./configs",
                   f"cat {absolute}/8B-lora.yaml ~/.cache/cfg/8B-lora.yaml",
                   {"configs": data(tmp_path), "cfg": data(tmp_path)}, setup="echo set up")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "set up\nlr: 1e-4\nlr: 1e-4\n"
    assert (tmp_path / "home" / ".cache" / "cfg").resolve() == data(tmp_path)


def test_a_stale_link_of_a_finished_attempt_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "configs"
    target.symlink_to(tmp_path / "gone")
    done = wrapped(tmp_path, f"  {target}: ./configs", f"cat {target}/8B-lora.yaml",
                   {"configs": data(tmp_path)})
    assert (done.returncode, done.stdout) == (0, "lr: 1e-4\n")


@pytest.mark.parametrize("there", ["file", "live link"])
def test_setup_fails_naming_the_field_rather_than_replace_what_is_there(
        tmp_path: Path, there: str) -> None:
    target = tmp_path / "configs"
    if there == "file":
        target.write_text("the node's own\n")
    else:
        (tmp_path / "other").mkdir()
        target.symlink_to(tmp_path / "other")
    done = wrapped(tmp_path, f"  {target}: ./configs", "echo run ran",
                   {"configs": data(tmp_path)})
    assert done.returncode == 1 and done.stdout == ""
    assert f"bourse: file_mounts.{target}: {target} " in done.stderr
    assert "bourse does not replace it" in done.stderr
    assert done.stderr.endswith("bourse: setup failed (exit 1)\n")
    assert there != "file" or target.read_text() == "the node's own\n"


def test_setup_fails_naming_the_field_where_the_link_cannot_be_made(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"  # a file, so no one (root neither) can make a folder there
    blocked.write_text("")
    done = wrapped(tmp_path, f"  {blocked}/configs: ./configs", "echo run ran",
                   {"configs": data(tmp_path)})
    assert done.returncode == 1 and done.stdout == ""
    assert f"bourse: file_mounts.{blocked}/configs: cannot make {blocked}/configs: the job's " \
           f"user may not write {blocked}" in done.stderr
