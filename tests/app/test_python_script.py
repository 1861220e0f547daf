"""``PythonScript``: positional arguments and ``--key value`` options reach the script's command
line; ``Data`` keyword arguments become ``BOURSE_INPUT_<NAME>``; outputs are
``BOURSE_OUTPUT_<NAME>`` directories."""

from __future__ import annotations

import json

import pytest
from app_harness import Project, local_path, summary_rows

from bourse import StageFailed

SCRIPT = """
    import json
    import os
    import sys
    from pathlib import Path

    data = Path(os.environ["BOURSE_INPUT_CORPUS"])
    seen = {
        "argv": sys.argv[1:],
        "corpus": (data / "corpus.txt").read_text(),
        "corpus_uri": os.environ["BOURSE_INPUT_CORPUS_URI"],
        "greeting": os.environ["GREETING"],
        "cwd": os.getcwd(),
    }
    out = Path(os.environ["BOURSE_OUTPUT_SEEN"])
    (out / "seen.json").write_text(json.dumps(seen))
    print("script done")
"""

APP = """
    from bourse import App, Compute, Flow, PythonScript, Work


    class Corpus(Work):
        outputs = ("corpus",)

        def run(self) -> None:
            (self.outputs["corpus"] / "corpus.txt").write_text("the quick brown fox")


    class Scripted(Flow):
        def __init__(self):
            self.corpus = Corpus(compute=Compute("cpu"))
            self.train = PythonScript("scripts/train.py", compute=Compute("cpu"),
                                      outputs=["seen"], env={"GREETING": "hi"})

        def run(self):
            corpus = self.corpus.run().outputs["corpus"]
            done = self.train.run("first", 2, 0.5, lr=0.001, num_epochs=3, resume=True,
                                  corpus=corpus)
            return {"seen": done.outputs["seen"].uri, "corpus": corpus.uri,
                    "work": done.work, "value": done.value, "exit_code": done.exit_code}


    app = App(Scripted())
"""


def test_arguments_options_and_data_reach_the_script(project: Project) -> None:
    project.write("scripts/train.py", SCRIPT).write("app.py", APP)

    out = project.run()

    seen = json.loads((local_path(out["seen"]) / "seen.json").read_text())
    assert seen["argv"] == ["first", "2", "0.5", "--lr", "0.001", "--num-epochs", "3",
                            "--resume", "True"]
    assert seen["corpus"] == "the quick brown fox"
    assert seen["corpus_uri"] == out["corpus"]
    assert seen["greeting"] == "hi"  # the stage's env
    assert seen["cwd"] == str(project.root)  # scripts run from the project root
    assert out["work"] == "train"  # named after the script
    assert out["value"] is None  # a script returns nothing but its exit code
    assert out["exit_code"] == 0


def test_a_script_s_output_is_echoed_with_its_stage_name(project: Project) -> None:
    project.write("scripts/train.py", SCRIPT).write("app.py", APP)

    done = project.cli("--local", "app.py")

    assert done.returncode == 0, done.stderr
    assert "[train] script done" in done.stdout.splitlines()
    assert summary_rows(done.stderr) == [("Corpus", "SUCCEEDED"), ("train", "SUCCEEDED")]


def test_a_script_s_exit_code_is_its_result(project: Project) -> None:
    project.write("fail.py", "import sys\nprint('giving up')\nsys.exit(3)\n")
    project.write("app.py", """
        from bourse import App, Compute, PythonScript

        app = App(PythonScript("fail.py", compute=Compute("cpu")))
    """)

    with pytest.raises(StageFailed) as failed:
        project.run()

    assert failed.value.result.exit_code == 3
    assert failed.value.log_tail == "giving up"
    assert str(failed.value).startswith("stage 'fail' failed (local run, exit code 3)")


def test_what_a_killed_script_printed_is_in_its_log(project: Project) -> None:
    """Local mode reads a script's output through a pipe, which Python buffers in blocks
    unless told otherwise: a script killed after a plain print() lost the line."""
    project.write("crash.py", "import os, signal\nprint('got this far')\n"
                              "os.kill(os.getpid(), signal.SIGKILL)\n")
    project.write("app.py", """
        from bourse import App, Compute, PythonScript

        app = App(PythonScript("crash.py", compute=Compute("cpu")))
    """)

    with pytest.raises(StageFailed) as failed:
        project.run()

    assert failed.value.result.exit_code == -9
    assert failed.value.log_tail == "got this far"


def test_a_lone_script_takes_the_command_line_s_arguments(project: Project) -> None:
    project.write("echo.py", """
        import sys

        print("argv:", *sys.argv[1:])
    """)
    project.write("app.py", """
        from bourse import App, Compute, PythonScript

        app = App(PythonScript("echo.py", compute=Compute("cpu")))
    """)

    done = project.cli("--local", "app.py", "--epochs", "3", "data.csv")

    assert done.returncode == 0, done.stderr
    assert "[echo] argv: --epochs 3 data.csv" in done.stdout.splitlines()
