"""The job's command, run by real bash: setup's effects reach run (its exports, a line it adds
to ~/.bashrc, a venv it activates), a failing setup fails the job with its exit code and says
so, a list run is an argv, and a lone job gets the gang's variables defaulted."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bourse.tasks import task_from_mapping
from bourse.tasks.wrap import command

BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def run(tmp_path: Path, args: tuple[str, ...] = (), env: dict[str, str] | None = None,
        **fields: Any) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    argv = command(task_from_mapping(fields), args)
    return subprocess.run(argv, cwd=tmp_path, env={**BASE_ENV, "HOME": str(home), **(env or {})},
                          capture_output=True, text=True, timeout=30, check=False)


def test_what_setup_exports_and_adds_to_bashrc_run_sees(tmp_path: Path) -> None:
    done = run(tmp_path, setup="export FROM_SETUP=1\n"
                               "echo 'export FROM_BASHRC=2' >> ~/.bashrc\n"
                               "greet() { echo hello $1; }\n",
               run='echo "$FROM_SETUP $FROM_BASHRC"\ngreet run\n')
    assert (done.returncode, done.stdout, done.stderr) == (0, "1 2\nhello run\n", "")


def test_a_venv_setup_activates_is_the_one_run_uses(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text(f'export VIRTUAL_ENV={tmp_path}/venv\n'
                                      f'export PATH="{bin_dir}:$PATH"\n')
    (bin_dir / "tool").write_text("#!/bin/sh\necho from the venv\n")
    (bin_dir / "tool").chmod(0o755)
    done = run(tmp_path, setup="source venv/bin/activate", run=["tool"])
    assert (done.returncode, done.stdout) == (0, "from the venv\n")


def test_a_failing_setup_fails_the_job_with_its_code_and_run_never_runs(
        tmp_path: Path) -> None:
    done = run(tmp_path, setup="echo installing\nfalse_cmd() { return 7; }\nfalse_cmd\n"
                               "echo not reached",
               run="echo run ran")
    assert done.returncode == 7
    assert done.stdout == "installing\n"
    assert done.stderr == "bourse: setup failed (exit 7)\n"


def test_an_exit_in_setup_is_said_to_end_the_job(tmp_path: Path) -> None:
    done = run(tmp_path, setup="exit 0", run="echo run ran")
    assert (done.returncode, done.stdout) == (1, "")
    assert "setup ended the job (exit 0) before run started" in done.stderr


def test_a_setup_cut_short_cannot_swallow_the_wrapper(tmp_path: Path) -> None:
    """A here-document left open ends with setup (bash warns), a quote left open fails
    setup: neither reads on into the wrapper's own lines."""
    done = run(tmp_path, setup="cat <<EOF\nunterminated", run="echo run ran")
    assert (done.returncode, done.stdout) == (0, "unterminated\nrun ran\n")
    done = run(tmp_path, setup="echo 'open quote", run="echo run ran")
    assert done.returncode == 2 and "setup failed (exit 2)" in done.stderr
    assert "run ran" not in done.stdout


def test_run_s_exit_code_is_the_job_s_and_run_has_no_set_e(tmp_path: Path) -> None:
    done = run(tmp_path, setup="true", run="false\necho still here\nexit 3")
    assert (done.returncode, done.stdout, done.stderr) == (3, "still here\n", "")


def test_a_list_run_is_an_argv_never_read_by_a_shell(tmp_path: Path) -> None:
    done = run(tmp_path, ("and $HOME", "`id`"), run=["printf", "[%s]\n", "a b", "$PATH;"])
    assert done.stdout == "[a b]\n[$PATH;]\n[and $HOME]\n[`id`]\n"


def test_words_after_dashes_are_a_script_s_arguments(tmp_path: Path) -> None:
    done = run(tmp_path, ("--lr", "3 e"), run='echo "$#:$1:$2"')
    assert done.stdout == "2:--lr:3 e\n"


def test_a_bashrc_that_fails_does_not_stop_run(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".bashrc").write_text("no_such_command_here\n")
    done = run(tmp_path, run="echo ran")
    assert (done.returncode, done.stdout) == (0, "ran\n")


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "0 1 127.0.0.1 0 1"),
    ({"CUDA_VISIBLE_DEVICES": "0,3"}, "0 1 127.0.0.1 2 2"),
    ({"CUDA_VISIBLE_DEVICES": ""}, "0 1 127.0.0.1 0 1"),
    ({"NODE_RANK": "1", "NNODES": "2", "NODE_IPS": "10.0.0.1\n10.0.0.2", "GPUS_PER_NODE": "4",
      "WORLD_SIZE": "8"}, "1 2 10.0.0.1 10.0.0.2 4 8"),  # a gang's own, untouched
])
def test_a_lone_job_gets_the_gang_s_variables_defaulted(
        tmp_path: Path, env: dict[str, str], expected: str) -> None:
    done = run(tmp_path, env=env,
               run=["sh", "-c", 'echo $NODE_RANK $NNODES $NODE_IPS $GPUS_PER_NODE $WORLD_SIZE'])
    assert done.stdout.strip() == expected


def test_an_imported_task_s_setup_is_a_script_of_its_own(tmp_path: Path) -> None:
    """SkyPilot's env_check.yaml: an ``exit 0`` in setup ends setup only; its exports stay in
    it, what it adds to ~/.bashrc reaches run; a failing setup still fails the job."""
    done = run(tmp_path, compat="skypilot",
               setup="export GONE=1\necho 'export KEPT=2' >> ~/.bashrc\nexit 0\necho no",
               run='echo "gone=${GONE:-} kept=$KEPT rank=$SKYPILOT_NODE_RANK"')
    assert (done.returncode, done.stdout, done.stderr) == (0, "gone= kept=2 rank=0\n", "")
    assert (tmp_path / "home" / "sky_workdir").resolve() == tmp_path.resolve()
    failed = run(tmp_path, compat="dstack", setup="echo a\nexit 3", run="echo run ran")
    assert (failed.returncode, failed.stdout) == (3, "a\n")
    assert failed.stderr == "bourse: setup failed (exit 3)\n"
