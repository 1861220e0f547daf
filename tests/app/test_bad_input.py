"""Bad input is a clear error before anything runs.

Each app starts with a ``Canary`` stage that would leave ``canary-ran`` behind: errors the app
can be checked for before it starts (no app, no compute, a bad GPU label, a bad output name)
must leave no trace at all; an unsendable argument must stop the call it is given to before
that stage starts.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from app_harness import Project

from bourse.core.errors import InvalidInput

HEAD = """
    from pathlib import Path

    from bourse import App, Compute, Data, Flow, PythonScript, Work


    class Canary(Work):
        def run(self) -> None:
            Path("canary-ran").touch()


    class Stage(Work):
        def run(self, **kwargs) -> None:
            Path("stage-ran").touch()


    class Opaque:
        pass
"""


def flow(setup: str, body: str) -> str:
    """An app whose flow holds a Canary and ``setup``'s stages and whose run() calls the canary
    first, then ``body``."""
    return HEAD + f"""

    class Checked(Flow):
        def __init__(self):
            self.canary = Canary(compute=Compute("cpu"))
            {setup}

        def run(self):
            self.canary.run()
            {body}


    app = App(Checked())
"""


def assert_nothing_ran(project: Project, stdout: str) -> None:
    assert not (project.root / "canary-ran").exists()
    assert not (project.root / "stage-ran").exists()
    assert "started locally" not in stdout


# (case, setup, what the error says): checked when the app is loaded, before any stage runs
BEFORE_THE_FIRST_STAGE = [
    ("no compute", "self.stage = Stage()",
     "compute: stage 'Stage' has no compute — give it one"),
    ("compute of the wrong type", "self.stage = Stage(compute={'gpu': 'a100'})",
     "compute: stage 'Stage': compute must be a Compute, got dict"),
    ("unknown GPU label", "self.stage = Stage(compute=Compute('a100-99gb'))",
     "gpu: unknown GPU 'a100-99gb' — did you mean a100-80gb or a100-40gb"),
    ("unknown GPU label as text", "self.stage = Stage(compute='h100x')",
     "gpu: unknown GPU 'h100x' — did you mean h100?"),
    ("output name with a dash", "self.stage = Stage(compute=Compute('cpu'), "
     "outputs=['my-model'])",
     "outputs: output name 'my-model' of Stage is not an identifier"),
    ("output name that is not text", "self.stage = Stage(compute=Compute('cpu'), "
     "outputs=[3])", "outputs: output name 3 of Stage is not an identifier"),
    ("more GPUs than any node has", "self.stage = Stage(compute='a100:1000000000000')",
     "gpu: GPU count in 'a100:1000000000000' must be a whole number from 1 to 64"),
    ("a machine name of Lightning's cloud", "self.stage = Stage(compute='gpu-fast')",
     "gpu: 'gpu-fast' is a machine of Lightning's cloud, not a GPU — say what it was: "
     "Compute(\"v100\", cpus=8, memory=\"61GB\")"),
    ("a TensorBoard directory outside the stage's", "self.stage = Stage(compute='cpu', "
     "tensorboard='../logs')", "tensorboard: '../logs' points outside the stage's directory"),
    ("a script above the project", "self.stage = PythonScript('../train.py', compute='cpu')",
     "script_path: '../train.py' points outside the project"),
    ("a script by absolute path", "self.stage = PythonScript('/tmp/train.py', compute='cpu')",
     "script_path: '/tmp/train.py' is absolute — write a path relative to the project"),
    ("a script that is not there", "self.stage = PythonScript('nope.py', compute='cpu')",
     "script_path: stage 'nope': nope.py is not a file of the project"),
]


@pytest.mark.parametrize(("setup", "says"), [c[1:] for c in BEFORE_THE_FIRST_STAGE],
                         ids=[c[0] for c in BEFORE_THE_FIRST_STAGE])
def test_a_bad_stage_is_refused_before_anything_runs(project: Project, setup: str,
                                                     says: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    project.write("app.py", flow(setup, "self.stage.run()"))

    with pytest.raises(InvalidInput) as refused:
        project.run()

    assert str(refused.value).startswith(says)
    assert_nothing_ran(project, capsys.readouterr().out)
    assert project.stage_dirs() == []


# (case, the call, what the error says): the call is refused before its stage starts
BAD_CALLS = [
    ("a set", "self.stage.run(labels={1, 2})",
     "labels: argument 'labels' of stage 'Stage' cannot be sent to a job (set is not JSON)"),
    ("an object", "self.stage.run(Opaque())",
     "arg0: argument 'arg0' of stage 'Stage' cannot be sent to a job (Opaque is not JSON)"),
    ("a NaN", "self.stage.run(lr=float('nan'))",
     "lr: argument 'lr' of stage 'Stage' cannot be sent to a job (float is not JSON)"),
    ("Data inside a list", "self.stage.run(parts=[Data('file:///tmp/a/')])",
     "parts: argument 'parts' of stage 'Stage' cannot be sent to a job (list is not JSON)"),
    ("an object store input in local mode", "self.stage.run(data=Data('s3://bucket/x/'))",
     "input: local mode reads file:// inputs; s3://bucket/x/ is in an object store"),
    ("a list to a script", "self.script.run(files=['a', 'b'])",
     "files: argument 'files' of stage 'train' is a list; a script takes strings and numbers"),
    ("Data as a script's positional argument", "self.script.run(Data('file:///tmp/a/'))",
     "argument 0: argument 'argument 0' of stage 'train' is a Data"),
]


@pytest.mark.parametrize(("call", "says"), [c[1:] for c in BAD_CALLS],
                         ids=[c[0] for c in BAD_CALLS])
def test_an_argument_that_cannot_be_sent_is_refused_before_its_stage_starts(
        project: Project, call: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    project.write("train.py", "open('stage-ran', 'w').close()\n")
    setup = ("self.stage = Stage(compute=Compute('cpu'))\n"
             "            self.script = PythonScript('train.py', compute=Compute('cpu'))")
    project.write("app.py", flow(setup, call).replace("self.canary.run()\n", ""))

    with pytest.raises(InvalidInput) as refused:
        project.run()

    assert str(refused.value).startswith(says)
    assert_nothing_ran(project, capsys.readouterr().out)


def test_app_run_checks_every_stage_before_running_any(project: Project) -> None:
    project.write("app.py", flow("self.stage = Stage()", "self.stage.run()") +
                  "\n\n    if __name__ == '__main__':\n        app.run(local=True)\n")

    done = subprocess.run([sys.executable, "app.py"], cwd=project.root, text=True,
                          capture_output=True, timeout=60, check=False)

    assert "has no compute" in done.stderr
    assert_nothing_ran(project, done.stdout)


NO_APP = """
    from bourse import Compute, Work


    class A(Work):
        def run(self) -> None:
            pass


    first, second = A(compute=Compute("cpu")), A(compute=Compute("cpu"))
"""


def test_an_app_file_without_an_app_is_a_usage_error(project: Project) -> None:
    done = project.write("app.py", NO_APP).cli("--local", "app.py")

    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: app: app.py defines no app — end it with `app = App(MyFlow())` "
        "(it has 2 stages and none is the app)")
    assert project.stage_dirs() == []


def test_an_empty_app_file_is_a_usage_error(project: Project) -> None:
    done = project.write("app.py", "x = 1\n").cli("--local", "app.py")

    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: app: app.py defines no app — end it with `app = App(MyFlow())`")


def test_an_unknown_gpu_is_refused_by_the_cli(project: Project) -> None:
    project.write("app.py", flow("self.stage = Stage(compute=Compute('a100-99gb'))",
                                 "self.stage.run()"))

    done = project.cli("--local", "app.py")

    assert done.returncode == 2
    assert done.stderr.startswith("error: gpu: unknown GPU 'a100-99gb' — did you mean ")
    assert_nothing_ran(project, done.stdout)
    assert project.stage_dirs() == []


@pytest.mark.parametrize("command", [["python", "train.py"], ["missing.py"]],
                         ids=["a plain command", "a file that is not there"])
def test_local_is_only_for_apps(project: Project, command: list[str]) -> None:
    project.write("train.py", "open('ran', 'w').close()\n")

    done = project.cli("--local", *command)

    assert done.returncode == 2
    assert "Error: --local runs apps (bourse run app.py)" in done.stderr
    assert not (project.root / "ran").exists()


def test_detach_and_local_do_not_go_together(project: Project) -> None:
    project.write("app.py", flow("", "pass"))

    done = project.cli("--local", "--detach", "app.py")

    assert done.returncode == 2
    assert "--detach submits the flow driver to the exchange; --local runs it here" in done.stderr
    assert_nothing_ran(project, done.stdout)


OUTSIDE = """
    from pathlib import Path

    from bourse import Compute, Work


    class Outside(Work):
        def run(self) -> None:
            Path("outside-ran").touch()
"""


def test_a_stage_defined_outside_the_project_is_refused(project: Project) -> None:
    """The project is the directory `bourse run` runs in: an app run from elsewhere has its
    stages outside it, and they could not be shipped with the project's code."""
    elsewhere = project.root.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "app.py").write_text(textwrap.dedent(OUTSIDE) + "\napp = Outside("
                                      "compute=Compute('cpu'))\n")

    done = project.cli("--local", "../elsewhere/app.py")

    assert done.returncode == 2
    assert "error: work: Outside is defined in " in done.stderr
    assert "outside the project " in done.stderr
    assert "run bourse from the project's directory" in done.stderr
    assert not (project.root / "outside-ran").exists()
    assert project.stage_dirs() == []


def test_a_later_stage_outside_the_project_is_refused_before_anything_runs(
        project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    lib = project.root.parent / "lib"
    lib.mkdir()
    (lib / "outside_stages.py").write_text(textwrap.dedent(OUTSIDE))
    project.write("app.py", flow(
        "import sys; sys.path.insert(0, str(Path('../lib').resolve()))\n"
        "            from outside_stages import Outside\n"
        "            self.outside = Outside(compute=Compute('cpu'))",
        "self.outside.run()"))

    with pytest.raises(InvalidInput, match="outside the project"):
        project.run()

    assert_nothing_ran(project, capsys.readouterr().out)


@pytest.mark.parametrize("setup", [
    "self.stages = [Stage()]",
    "self.stages = {'only': Stage()}",
    "self.stages = Holder()",
], ids=["in a list", "in a dict", "in a nested flow"])
def test_a_stage_without_compute_anywhere_in_the_flow_is_refused_first(
        project: Project, setup: str, capsys: pytest.CaptureFixture[str]) -> None:
    holder = "\n\n    class Holder(Flow):\n        def __init__(self):\n" \
             "            self.stage = Stage()\n"
    calls = {"[": "self.stages[0].run()", "{": "self.stages['only'].run()",
             "H": "self.stages.stage.run()"}
    call = calls[setup.removeprefix("self.stages = ")[0]]
    project.write("app.py", flow(setup, call).replace("\n\n    class Checked", holder +
                                                      "\n\n    class Checked"))

    with pytest.raises(InvalidInput, match="has no compute"):
        project.run()

    assert_nothing_ran(project, capsys.readouterr().out)


def test_a_multi_node_stage_is_refused_in_local_mode_before_it_starts(
        project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    """A local stage is one process: one asking for two nodes would wait for ever."""
    setup = "self.stage = Stage(compute=Compute('cpu', nodes=2))"
    project.write("app.py", flow(setup, "self.stage.run()").replace("self.canary.run()\n", ""))

    with pytest.raises(InvalidInput) as refused:
        project.run()

    assert str(refused.value).startswith(
        "compute.num_nodes: stage 'Stage' asks for 2 nodes, and a local run is one process")
    assert_nothing_ran(project, capsys.readouterr().out)
