"""``submit()`` + ``bourse.wait()``: independent stages run side by side.

Each stage announces itself in a shared folder and waits for the other to announce itself
too, so the test passes only if both processes are alive at once — no timing guesses; the
start and end times they record must overlap as well.
"""

from __future__ import annotations

from app_harness import Project

APP = """
    import time
    from pathlib import Path

    import bourse
    from bourse import App, Compute, Flow, Work

    MEET_WITHIN_S = 20


    class Meet(Work):
        def run(self, me: str, other: str, folder: str) -> dict:
            started = time.time()
            Path(folder, me).touch()
            deadline = time.monotonic() + MEET_WITHIN_S
            while not Path(folder, other).exists():
                if time.monotonic() > deadline:
                    raise SystemExit(f"{other} never started while {me} was running")
                time.sleep(0.01)
            return {"start": started, "end": time.time()}


    class Side(Flow):
        def __init__(self):
            self.left = Meet(compute=Compute("cpu"), name="left")
            self.right = Meet(compute=Compute("cpu"), name="right")

        def run(self, folder):
            left = self.left.submit(me="left", other="right", folder=folder)
            right = self.right.submit(me="right", other="left", folder=folder)
            results = bourse.wait(left, right)
            return {r.work: r.value for r in results}


    app = App(Side())
"""


def test_submitted_stages_run_at_the_same_time(project: Project) -> None:
    folder = project.root / "meeting"
    folder.mkdir()

    times = project.write("app.py", APP).run(str(folder))

    left, right = times["left"], times["right"]
    assert left["start"] < right["end"] and right["start"] < left["end"]
    assert sorted(p.name for p in folder.iterdir()) == ["left", "right"]


def test_run_blocks_until_the_stage_ends(project: Project) -> None:
    project.write("app.py", """
        import time

        from bourse import App, Compute, Flow, Work


        class Span(Work):
            def run(self) -> dict:
                return {"start": time.time(), "end": time.time()}


        class Serial(Flow):
            def __init__(self):
                self.one = Span(compute=Compute("cpu"), name="one")
                self.two = Span(compute=Compute("cpu"), name="two")

            def run(self):
                return [self.one.run().value, self.two.run().value]


        app = App(Serial())
    """)

    one, two = project.run()

    assert one["end"] <= two["start"]
