"""Apps on a real local exchange (`bourse run app.py`, not --local): every stage a job placed
on an agent, its data in the exchange's SeaweedFS store. Same outputs as local mode (whose run
of the demo app is checked here too: stages, outputs, a complete checkpoint per epoch), a failing
stage's job id and log tail, independent stages side by side, the stage cache, and bad input
refused before anything reaches the exchange."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
import uuid
from pathlib import Path

import pytest
from app_harness import Project, final_value, started_order, summary_rows
from exchange_harness import ExchangeUnderTest
from test_failures import THREE

from bourse import StageFailed
from bourse.app.exchange import ExchangeBackend, new_run_id
from bourse.app.loader import load_app
from bourse.app.result import Result
from bourse.core.uri import parse_uri
from bourse.protocol.api import RunDetail
from bourse.protocol.common import REDACTED

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STAGES = ["Prepare", "Train", "Evaluate"]


def submitted(stdout: str) -> dict[str, str]:
    """stage -> job id, from the `[stage] submitted as job ID` lines."""
    return dict(re.findall(r"^\[(\S+)\] submitted as job (\S+)$", stdout, flags=re.MULTILINE))


def test_the_digits_app_gives_the_same_results_locally_and_on_the_exchange(
        project: Project, exchange: ExchangeUnderTest) -> None:
    for name in ("digits_app.py", "digits_model.py"):
        shutil.copy(EXAMPLES / name, project.root / name)

    local = exchange.cli("run", "--local", "digits_app.py", "--", "2", cwd=project.root)
    remote = exchange.cli("run", "digits_app.py", "--", "2", cwd=project.root)

    assert local.returncode == 0, local.stdout + local.stderr
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert summary_rows(remote.stderr) == [(stage, "SUCCEEDED") for stage in STAGES]
    jobs = submitted(remote.stdout)
    assert list(jobs) == STAGES
    for job_id in jobs.values():
        detail = exchange.client.job(job_id)
        assert detail.state == "SUCCEEDED" and detail.attempts[-1].node_name
    run = exchange.client.run(exchange.client.job(jobs["Train"]).spec.run or "")
    assert [(e.source, e.target, e.inputs) for e in run.edges] == [  # the data, as passed
        ("Prepare", "Train", ["shards"]), ("Prepare", "Evaluate", ["shards"]),
        ("Train", "Evaluate", ["model"])]
    here, there = final_value(local.stdout), final_value(remote.stdout)
    assert here["shards_sha256"] == there["shards_sha256"]  # the same shards
    assert here["samples"] == there["samples"] == 360
    assert there["test_accuracy"] > 0.8
    assert abs(here["test_accuracy"] - there["test_accuracy"]) < 0.02  # seeds are fixed
    assert_local_run(project, local.stdout, here)


def assert_local_run(project: Project, stdout: str, report: dict[str, object]) -> None:
    """What local mode left: each stage's outputs, the report as Evaluate wrote it, and one
    complete checkpoint per epoch (the local half of the comparison, 2 epochs)."""
    assert started_order(stdout) == STAGES
    [run] = project.runs()
    written = json.loads((run / "Evaluate/outputs/report/report.json").read_text())
    assert {**written, "shards_sha256": report["shards_sha256"]} == report
    assert len(str(report["shards_sha256"])) == 64  # what Prepare wrote, to compare runs by
    assert (run / "Train/outputs/model/model.ckpt").stat().st_size > 0
    assert sorted(p.name for p in (run / "Prepare/outputs/shards").iterdir()) == [
        "test.npz", "train.npz", "val.npz"]
    assert_complete_checkpoints(run / "Train/checkpoints", epochs=2)


def assert_complete_checkpoints(prefix: Path, epochs: int) -> None:
    """One complete checkpoint per epoch: a marker naming files that are all there."""
    markers = sorted((prefix / ".complete").glob("*.json"))
    assert len(markers) == epochs
    steps = []
    for marker in markers:
        doc = json.loads(marker.read_text())
        assert marker.stem == doc["name"]
        steps.append(doc["step"])
        [entry] = doc["files"]
        saved = Path("/" + entry["key"])
        assert saved == prefix / doc["name"] / "last.ckpt"
        assert saved.stat().st_size == entry["size"] > 0
    assert steps == sorted(steps) and len(set(steps)) == epochs


def test_a_failing_middle_stage_stops_the_flow_with_its_job_and_log(
        project: Project, exchange: ExchangeUnderTest) -> None:
    done = exchange.cli("run", project.write("app.py", THREE).root / "app.py",
                        cwd=project.root)

    assert done.returncode == 1
    jobs = submitted(done.stdout)
    assert list(jobs) == ["First", "Middle"]  # Last never submitted
    assert f"error: stage 'Middle' failed (job {jobs['Middle']}, exit code 1)" in done.stderr
    assert "line 29" in done.stderr and "ValueError: boom in the middle" in done.stderr
    assert exchange.client.job(jobs["Middle"]).state == "FAILED"
    assert summary_rows(done.stderr) == [("First", "SUCCEEDED"), ("Middle", "FAILED")]


SIDE_BY_SIDE = """
    import time

    import bourse
    from bourse import App, Compute, Flow, Work


    class Nap(Work):
        def run(self) -> float:
            time.sleep(4)
            self.woke = time.time()  # comes back to the flow, through the job's log
            return self.woke


    class Both(Flow):
        def __init__(self):
            self.left = Nap(compute=Compute("cpu"), name="left")
            self.right = Nap(compute=Compute("cpu"), name="right")

        def run(self):
            values = [r.value for r in bourse.wait(self.left.submit(), self.right.submit())]
            return values == [self.left.woke, self.right.woke]


    app = App(Both())
"""


def test_two_independent_stages_run_at_the_same_time(
        project: Project, exchange: ExchangeUnderTest) -> None:
    done = exchange.cli("run", "app.py", cwd=project.write("app.py", SIDE_BY_SIDE).root)

    assert done.returncode == 0, done.stdout + done.stderr
    assert final_value(done.stdout) is True  # each stage's attributes came back to it
    spans = []
    for job_id in submitted(done.stdout).values():
        attempts = exchange.client.job(job_id).attempts
        if len(attempts) != 1:  # no attempt lost or retried: say what happened, in full
            pytest.fail("\n".join(f"{e.kind}: {e.message}"
                                   for e in exchange.client.events(job_id)), pytrace=False)
        [attempt] = attempts
        assert attempt.started_at is not None and attempt.ended_at is not None
        spans.append((attempt.started_at, attempt.ended_at))
    (start_a, end_a), (start_b, end_b) = spans
    assert max(start_a, start_b) < min(end_a, end_b)  # the timelines overlap


CACHED = """
    from bourse import App, Compute, Flow, Work


    class Square(Work):
        outputs = ("result",)

        def run(self, n: int) -> int:
            (self.outputs["result"] / "n.txt").write_text(str(n * n))
            return n * n


    class Twice(Flow):
        def __init__(self):
            self.square = Square(compute=Compute("cpu"), cache=True)

        def run(self):
            first, second = self.square.run(n=7), self.square.run(n=7)
            return [first.value, second.value, second.cached, first.job_id == second.job_id,
                    first.outputs["result"].uri == second.outputs["result"].uri]


    app = App(Twice())
"""


def test_an_identical_cached_call_is_not_submitted_again(
        project: Project, exchange: ExchangeUnderTest) -> None:
    done = exchange.cli("run", "app.py", cwd=project.write("app.py", CACHED).root)

    assert done.returncode == 0, done.stdout + done.stderr
    assert final_value(done.stdout) == [49, 49, True, True, True]
    assert len(submitted(done.stdout)) == 1
    assert "[Square] cached: reusing the result of job" in done.stdout


BAD = {
    "no app": ("x = 1\n", "error: app: app.py defines no app"),
    "no compute": ("from bourse import App, Work\n\n\nclass S(Work):\n    def run(self):\n"
                   "        pass\n\n\napp = App(S())\n",
                   "error: compute: stage 'S' has no compute"),
    "unknown GPU": ("from bourse import App, Compute, Work\n\n\nclass S(Work):\n"
                    "    def run(self):\n        pass\n\n\napp = App(S(compute='a100-99gb'))\n",
                    "error: gpu: unknown GPU 'a100-99gb'"),
    "unserialisable argument": (
        "from bourse import App, Compute, Flow, Work\n\n\nclass S(Work):\n"
        "    def run(self, tags):\n        pass\n\n\nclass F(Flow):\n    def __init__(self):\n"
        "        self.s = S(compute=Compute('cpu'))\n\n    def run(self):\n"
        "        self.s.run(tags={1, 2})\n\n\napp = App(F())\n",
        "error: tags: argument 'tags' of stage 'S' cannot be sent to a job (set is not JSON)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_refused_before_anything_is_submitted(
        project: Project, exchange: ExchangeUnderTest, case: str) -> None:
    text, says = BAD[case]
    before = len(exchange.jobs())

    done = exchange.cli("run", "app.py", cwd=project.write("app.py", text).root)

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].startswith(says) or says in done.stderr
    assert "submitted as job" not in done.stdout
    assert len(exchange.jobs()) == before


def wait_for_run(exchange: ExchangeUnderTest, run_id: str, timeout: float = 150.0) -> RunDetail:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = exchange.client.run(run_id)
        if run.ended_at is not None:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not end in {timeout:.0f} s")


def test_a_detached_run_drives_its_stages_from_a_job_of_its_own(
        project: Project, exchange: ExchangeUnderTest) -> None:
    project.write("app.py", THREE.replace('raise ValueError("boom in the middle")', "pass"))

    started = time.monotonic()
    done = exchange.cli("run", "--detach", "app.py", cwd=project.root)

    assert done.returncode == 0, done.stdout + done.stderr
    run_id = done.stdout.strip()
    assert time.monotonic() - started < 60  # it returns once the driver is submitted
    run = wait_for_run(exchange, run_id)
    assert (run.state, run.app, run.stages) == ("SUCCEEDED", "app.py", 3), [
        (j.spec.stage, j.state, j.reason) for j in run.jobs]
    driver, *stages = run.jobs
    assert driver.id == run.driver and driver.spec.stage is None
    assert driver.spec.env["BOURSE_TOKEN"] == REDACTED  # the API never shows the token
    assert [j.spec.stage for j in stages] == ["First", "Middle", "Last"]
    assert all(j.spec.run == run_id and j.state == "SUCCEEDED" for j in stages)
    listed = json.loads(exchange.cli("runs", "--json", cwd=project.root).stdout)
    assert run_id in [r["id"] for r in listed]
    shown = exchange.cli("runs", "show", run_id, cwd=project.root)
    assert shown.returncode == 0, shown.stderr
    assert "(driver)" in shown.stdout and "Middle" in shown.stdout
    assert "bse_u_" not in shown.stdout + json.dumps(listed)  # nor the CLI


READ = """
    from pathlib import Path

    from bourse import App, Compute, Data, Flow, Work


    class Read(Work):
        outputs = ("seen",)

        def run(self, corpus: Path) -> dict:
            found = {p.name: p.read_text() for p in sorted(corpus.iterdir())}
            (self.outputs["seen"] / "names.txt").write_text(" ".join(found))
            return found


    class Reading(Flow):
        def __init__(self):
            self.read = Read(compute=Compute("cpu"), cache=True)

        def run(self, uri):
            return self.read.run(corpus=Data(uri))


    app = App(Reading())
"""


class CachedApp:
    """The READ app run in this process on the exchange, one run per call, with the
    exchange's store at hand to change what its input holds between runs."""

    def __init__(self, project: Project, exchange: ExchangeUnderTest) -> None:
        self.project, self.exchange = project, exchange
        self.app = load_app(project.write("app.py", READ).root / "app.py")
        self.store = exchange.store()
        self.prefix = f"mine/{uuid.uuid4().hex[:8]}/"

    def put(self, name: str, text: str) -> None:
        asyncio.run(self.store.put(self.prefix + name, text.encode()))

    def run(self) -> Result:
        backend = ExchangeBackend(self.exchange.client, self.project.root, new_run_id())
        result: Result = self.app.run(f"s3://bourse/{self.prefix}", project=self.project.root,
                                      backend=backend)
        return result


def test_the_cache_keys_object_store_inputs_by_what_the_store_holds(
        project: Project, exchange: ExchangeUnderTest) -> None:
    app = CachedApp(project, exchange)
    app.put("a.txt", "one")

    first, same = app.run(), app.run()
    app.put("a.txt", "uno")  # rewritten under the same key
    rewritten = app.run()
    app.put("b.txt", "two")  # added under the prefix
    added, again = app.run(), app.run()

    assert (first.value, first.cached) == ({"a.txt": "one"}, False)
    assert (same.cached, same.job_id) == (True, first.job_id)
    assert (rewritten.value, rewritten.cached) == ({"a.txt": "uno"}, False)
    assert (added.value, added.cached) == ({"a.txt": "uno", "b.txt": "two"}, False)
    assert (again.cached, again.job_id) == (True, added.job_id)


def test_a_cached_result_whose_outputs_are_gone_runs_again(
        project: Project, exchange: ExchangeUnderTest, capsys: pytest.CaptureFixture[str]) -> None:
    app = CachedApp(project, exchange)
    app.put("a.txt", "one")
    first = app.run()
    seen = parse_uri(first.outputs["seen"].uri)
    asyncio.run(app.store.delete(seen.key + "names.txt"))

    second, third = app.run(), app.run()

    assert (first.cached, second.cached, third.cached) == (False, False, True)
    assert second.job_id != first.job_id and third.job_id == second.job_id
    assert "[Read] cache: the outputs of the cached result changed or are gone" in (
        capsys.readouterr().out)


def test_an_input_the_exchange_cannot_read_runs_the_stage_and_says_why(
        project: Project, exchange: ExchangeUnderTest, capsys: pytest.CaptureFixture[str]) -> None:
    app = CachedApp(project, exchange)
    backend = ExchangeBackend(exchange.client, project.root, new_run_id())

    with pytest.raises(StageFailed):  # a bucket that does not exist: the job fails, loudly
        app.app.run("s3://no-such-bucket/data/", project=project.root, backend=backend)

    out = capsys.readouterr().out
    assert "[Read] cache: cannot read input 'corpus' at s3://no-such-bucket/data/" in out
    assert "running the stage; its result will not be cached" in out
    assert "[Read] submitted as job" in out


FLAKY = """
    import asyncio
    import os

    from bourse import App, Compute, Work
    from bourse.storage import ObjectNotFound, Stores, StoreSettings, parse_uri


    class Flaky(Work):
        \"\"\"Fails on its first run, leaving a mark under its checkpoint prefix; a retry finds
        the mark there (every run of a stage has the same checkpoint URI) and succeeds.\"\"\"

        def run(self) -> str:
            mark = parse_uri(self.checkpoint).join("tried")
            store = Stores(StoreSettings.from_env(os.environ))(mark)
            try:
                asyncio.run(store.head(mark.key))
            except ObjectNotFound:
                asyncio.run(store.put(mark.key, b"1"))
                raise SystemExit("first run fails") from None
            return "second time lucky"


    app = App(Flaky(compute=Compute("cpu"), retries=1))
"""


def test_retries_start_a_failed_stage_again_as_a_new_job_with_the_same_checkpoint(
        project: Project, exchange: ExchangeUnderTest) -> None:
    done = exchange.cli("run", "app.py", cwd=project.write("app.py", FLAKY).root)

    assert done.returncode == 0, done.stdout + done.stderr
    assert final_value(done.stdout) == "second time lucky"
    assert "[Flaky] FAILED; retrying (1/1)" in done.stdout
    jobs = re.findall(r"^\[Flaky\] submitted as job (\S+)$", done.stdout, flags=re.MULTILINE)
    details = [exchange.client.job(job_id) for job_id in jobs]
    assert [d.state for d in details] == ["FAILED", "SUCCEEDED"]
    assert details[0].spec.checkpoint == details[1].spec.checkpoint
