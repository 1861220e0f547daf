"""Data flows by value in local mode: a stage's output, passed as the next stage's argument,
arrives there as a local directory; what a stage returns reaches ``Result.value``."""

from __future__ import annotations

import json

import pytest
from app_harness import Project, final_value, local_path, summary_rows

PIPE = """
    from pathlib import Path

    from bourse import App, Compute, Data, Flow, Work


    class Write(Work):
        outputs = ("words",)

        def run(self, text: str) -> str:
            (self.outputs["words"] / "words.txt").write_text(text)
            return "written"


    class Read(Work):
        def run(self, words: Path, extra: Path) -> dict:
            return {"words": (words / "words.txt").read_text(),
                    "extra": (extra / "note.txt").read_text(),
                    "is_dir": words.is_dir(),
                    "inputs": {name: str(path) for name, path in sorted(self.inputs.items())}}


    class Pipe(Flow):
        def __init__(self):
            self.write = Write(compute=Compute("cpu"))
            self.read = Read(compute=Compute("cpu"))

        def run(self):
            written = self.write.run(text="to be or not to be")
            mine = Data(Path("mine").resolve().as_uri() + "/")
            read = self.read.run(written.outputs["words"], extra=mine)
            return {"uri": written.outputs["words"].uri, "read": read.value,
                    "value": written.value}


    app = App(Pipe())
"""


def test_an_output_reaches_the_next_stage_as_a_local_directory(project: Project) -> None:
    project.write("app.py", PIPE).write("mine/note.txt", "a file of my own")

    out = project.run()

    words = local_path(out["uri"])
    [run] = project.runs()
    assert words == run / "Write" / "outputs" / "words"
    assert (words / "words.txt").read_text() == "to be or not to be"
    assert out["value"] == "written"
    assert out["read"]["words"] == "to be or not to be"
    assert out["read"]["extra"] == "a file of my own"  # a file:// Data of the user's own
    assert out["read"]["is_dir"] is True
    # positional Data arguments are named arg<i>, keyword ones by their keyword
    assert out["read"]["inputs"] == {"arg0": str(words), "extra": str(project.root / "mine")}


ENV = """
    import os

    from bourse import App, Compute, Flow, Work


    class Make(Work):
        outputs = ("table",)

        def run(self) -> str:
            (self.outputs["table"] / "t.csv").write_text("a,b")
            return "made"


    class Look(Work):
        outputs = ("report",)

        def run(self, table) -> dict:
            seen = {k: v for k, v in os.environ.items() if k.startswith("BOURSE_")
                    and k not in ("BOURSE_CALL", "BOURSE_IN_STAGE")}
            return {"env": seen, "checkpoint": self.checkpoint,
                    "report_empty": list(self.outputs["report"].iterdir()) == [],
                    "table": str(table)}


    class Show(Flow):
        def __init__(self):
            self.make = Make(compute=Compute("cpu"))
            self.look = Look(compute=Compute("cpu"))

        def run(self):
            made = self.make.run()
            looked = self.look.run(table=made.outputs["table"])
            return {"seen": looked.value, "checkpoint": looked.checkpoint,
                    "table_uri": made.outputs["table"].uri,
                    "report_uri": looked.outputs["report"].uri}


    app = App(Show())
"""


def test_what_a_stage_sees_of_its_data(project: Project) -> None:
    out = project.write("app.py", ENV).run()

    [run] = project.runs()
    stage = run / "Look"
    seen, env = out["seen"], out["seen"]["env"]
    assert env["BOURSE_INPUT_TABLE"] == seen["table"] == str(run / "Make/outputs/table")
    assert env["BOURSE_INPUT_TABLE_URI"] == out["table_uri"]
    assert env["BOURSE_OUTPUT_REPORT"] == str(stage / "outputs/report")
    assert seen["report_empty"] is True
    checkpoint = (stage / "checkpoints").as_uri() + "/"
    assert env["BOURSE_CHECKPOINT_URI"] == seen["checkpoint"] == out["checkpoint"] == checkpoint
    assert (stage / "checkpoints").is_dir()
    assert out["report_uri"] == (stage / "outputs/report").as_uri() + "/"


def test_a_stage_sees_its_output_uris_as_on_an_exchange(project: Project) -> None:
    out = project.write("app.py", ENV).run()

    assert out["seen"]["env"].get("BOURSE_OUTPUT_REPORT_URI") == out["report_uri"]


VALUE = """
    import math
    from pathlib import Path

    import bourse
    from bourse import App, Compute, Flow, Work

    CASES = {
        "dict": lambda: {"loss": 0.25, "tags": ["a", None, True], "n": 3},
        "text": lambda: "done",
        "number": lambda: 7,
        "none": lambda: None,
        "set": lambda: {3},
        "path": lambda: Path("out/model.pt"),
        "nan": lambda: {"loss": math.nan},
        "object": lambda: Opaque(),
    }


    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque>"


    class Give(Work):
        def run(self, case: str):
            return CASES[case]()


    class Values(Flow):
        def __init__(self):
            self.stages = {case: Give(compute=Compute("cpu"), name=f"give_{case}")
                           for case in CASES}

        def run(self):
            handles = [stage.submit(case=case) for case, stage in self.stages.items()]
            return {r.work.removeprefix("give_"): r.value for r in bourse.wait(*handles)}


    app = App(Values())
"""


def test_the_body_s_return_value_reaches_result_value(project: Project) -> None:
    values = project.write("app.py", VALUE).run()

    assert values == {
        "dict": {"loss": 0.25, "tags": ["a", None, True], "n": 3},
        "text": "done", "number": 7, "none": None,
        # what is not JSON comes back as its repr
        "set": "{3}", "path": "PosixPath('out/model.pt')", "nan": "{'loss': nan}",
        "object": "<Opaque>",
    }


def test_the_cli_prints_the_flow_s_value_as_json(project: Project) -> None:
    project.write("app.py", """
        from bourse import App, Compute, Flow, Work


        class Square(Work):
            def run(self, n: int) -> int:
                return n * n


        class Squares(Flow):
            def __init__(self):
                self.square = Square(compute=Compute("cpu"))

            def run(self, *args):
                return {"args": list(args), "nine": self.square.run(n=3).value}


        app = App(Squares())
    """)

    done = project.cli("--local", "app.py", "7", "x")

    assert done.returncode == 0, done.stderr
    # arguments after app.py reach Flow.run as strings, unparsed
    assert final_value(done.stdout) == {"args": ["7", "x"], "nine": 9}


def test_arguments_after_a_double_dash_reach_the_flow(project: Project) -> None:
    project.write("app.py", """
        from bourse import App, Compute, Flow, Work


        class Noop(Work):
            def run(self) -> None:
                return None


        class Echo(Flow):
            def __init__(self):
                self.noop = Noop(compute=Compute("cpu"))

            def run(self, *args):
                return list(args)


        app = App(Echo())
    """)

    done = project.cli("--local", "app.py", "--", "--epochs", "3")

    assert done.returncode == 0, done.stderr
    assert final_value(done.stdout) == ["--epochs", "3"]


TWICE = """
    from bourse import App, Compute, Flow, Work


    class Note(Work):
        outputs = ("note",)

        def run(self, text: str) -> str:
            (self.outputs["note"] / "note.txt").write_text(text)
            return text


    class Both(Work):
        def run(self, first, second) -> list:
            return [(first / "note.txt").read_text(), (second / "note.txt").read_text()]


    class Twice(Flow):
        def __init__(self):
            self.note = Note(compute=Compute("cpu"))
            self.other = Note(compute=Compute("cpu"))
            self.both = Both(compute=Compute("cpu"))

        def run(self, how):
            first = self.note.run(text="first")
            again = self.note if how == "same stage" else self.other
            second = again.run(text="second")
            return self.both.run(first.outputs["note"], second.outputs["note"]).value


    app = App(Twice())
"""


@pytest.mark.parametrize("how", ["same stage", "same class"])
def test_each_call_keeps_its_own_outputs(project: Project, how: str) -> None:
    assert project.write("app.py", TWICE).run(how) == ["first", "second"]


def test_an_app_in_a_sub_folder_imports_its_siblings_in_its_stages(project: Project) -> None:
    project.write("pipelines/helpers.py", "GREETING = 'hello from a sibling'\n")
    project.write("pipelines/app.py", """
        from bourse import App, Compute, Work


        class Greet(Work):
            def run(self) -> str:
                from helpers import GREETING

                return GREETING


        app = App(Greet(compute=Compute("cpu")))
    """)

    done = project.cli("--local", "pipelines/app.py")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == "hello from a sibling"


LONE = """
    from bourse import Compute, Work


    class Hello(Work):
        def run(self, who: str = "world") -> str:
            return f"hello {who}"


    hello = Hello(compute=Compute("cpu"))
"""


def test_a_lone_work_is_an_app(project: Project) -> None:
    done = project.write("app.py", LONE).cli("--local", "app.py", "bourse")

    assert done.returncode == 0, done.stderr
    assert summary_rows(done.stderr) == [("Hello", "SUCCEEDED")]
    assert "hello bourse" in done.stdout


def test_a_lone_work_app_prints_its_value(project: Project) -> None:
    done = project.write("app.py", LONE).cli("--local", "app.py", "bourse")

    assert final_value(done.stdout) == "hello bourse"
