"""``bourse run``: pack, upload, submit, stream, exit with the job's code."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import httpx
import pytest
from cli_exchange import NOW, FakeExchange, chunk, job_view, sse
from click.testing import CliRunner, Result

from bourse.cli import client as seam
from bourse.cli.main import cli
from bourse.cli.run import StatusLine
from bourse.protocol.api import JobView
from bourse.sdk.client import Client


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["run", *args])


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "lib").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "lib" / "m.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("*.ckpt\n")
    (root / "old.ckpt").write_text("weights")
    monkeypatch.chdir(root)
    return root


def test_detach_uploads_code_and_prints_the_id(exchange: FakeExchange) -> None:
    result = run("--gpu", "a100", "--cpus", "8+", "--name", "exp", "--env", "SEED=1",
                 "--max-retries", "1", "--detach", "--", "python", "train.py", "--lr", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout == "j1\n"
    assert "code: 3 files" in result.stderr and "uploaded" in result.stderr
    [(sha, tarball)] = exchange.bundles.items()
    assert hashlib.sha256(tarball).hexdigest() == sha
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        assert sorted(tar.getnames()) == [".gitignore", "lib", "lib/m.py", "train.py"]
    [spec] = exchange.submitted()
    assert spec["command"] == ["python", "train.py", "--lr", "3"]
    assert (spec["name"], spec["env"], spec["bundle"], spec["max_retries"]) == (
        "exp", {"SEED": "1"}, sha, 1)
    assert spec["compute"]["gpu"]["requested"] == "a100"
    assert spec["compute"]["cpus"]["min"] == 8


def test_unchanged_code_is_not_uploaded_twice(exchange: FakeExchange) -> None:
    assert run("-d", "python", "train.py").exit_code == 0
    assert run("-d", "python", "train.py").exit_code == 0
    assert [r.method for r in exchange.requests if "/bundles/" in r.url.path] == [
        "HEAD", "PUT", "HEAD"]
    first, second = exchange.submitted()
    assert first["bundle"] == second["bundle"]


def test_no_code(exchange: FakeExchange) -> None:
    result = run("--no-code", "-d", "nvidia-smi")
    assert result.exit_code == 0, result.output
    assert not any("/bundles/" in r.url.path for r in exchange.requests)
    assert exchange.submitted()[0]["bundle"] is None


def test_options_after_the_command_belong_to_it(exchange: FakeExchange) -> None:
    assert run("--no-code", "-d", "python", "train.py", "--gpu", "x", "-d").exit_code == 0
    assert exchange.submitted()[0]["command"] == ["python", "train.py", "--gpu", "x", "-d"]


def test_unknown_option_before_the_command(exchange: FakeExchange) -> None:
    result = run("--gpux", "a100", "python")
    assert result.exit_code == 2
    assert exchange.requests == []


def test_env_from_here_and_bad_names(exchange: FakeExchange,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_PROJECT", "p1")
    assert run("--no-code", "-d", "--env", "WANDB_PROJECT", "--env", "A=b=c", "x").exit_code == 0
    assert exchange.submitted()[0]["env"] == {"WANDB_PROJECT": "p1", "A": "b=c"}
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    result = run("--no-code", "-d", "--env", "NOT_SET_HERE", "x")
    assert (result.exit_code, "NOT_SET_HERE is not set here" in result.stderr) == (2, True)
    result = run("--no-code", "-d", "--env", "1BAD=x", "x")
    assert result.exit_code == 2
    assert "env" in result.stderr


def test_bad_compute_is_bad_input(exchange: FakeExchange) -> None:
    result = run("--gpu", "a1000", "--no-code", "x")
    assert result.exit_code == 2
    assert "unknown GPU" in result.stderr
    assert exchange.requests == []


# (flags, the one line on stderr starts with): refused before anything is sent, named as the
# flag; each was accepted before and then waited for ever
BAD_COMPUTE_FLAGS = [
    (("--gpu", "a100:1000000000000"), "error: --gpu: GPU count in 'a100:1000000000000' must "
     "be a whole number from 1 to 64"),
    (("--gpus", "100000"), "error: --gpus: gpus must be a whole number from 1 to 64"),
    (("--region", "["), "error: --region: '[': '[' opens a class that is never closed — "),
    (("--exclude-provider", "aw[s"), "error: --exclude-provider: 'aw[s': '[' opens a class"),
    (("--cpus", "1e300"), "error: --cpus: 1e+300 is more than any node has — ask for at "
     "most 4,096"),
    (("--memory", "99999TB"), "error: --memory: 102,398,976GB is more than any node has"),
    (("--gpu-memory", "5TB"), "error: --gpu-memory: 5,120GB is more than any node has"),
    (("--max-price", "99999"), "error: --max-price: $99999/h is more than any machine costs"),
    (("--tag", "PCI DSS"), "error: --tag: tag 'PCI DSS' is not a tag"),
    (("--package", "--index-url=http://x"), "error: --package: '--index-url=http://x' is not "
     "a requirement specifier"),
    (("--image", "--privileged"), "error: --image: '--privileged' is not an image reference"),
    (("--gpu", "gpu-fast"), "error: --gpu: 'gpu-fast' is a machine of Lightning's cloud"),
]


@pytest.mark.parametrize(("flags", "says"), BAD_COMPUTE_FLAGS,
                         ids=[" ".join(f) for f, _ in BAD_COMPUTE_FLAGS])
def test_bad_compute_flags_are_one_line_of_bad_input(exchange: FakeExchange,
                                                     flags: tuple[str, ...], says: str) -> None:
    result = run(*flags, "--no-code", "python", "train.py")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(says)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert exchange.requests == []


@pytest.mark.parametrize("gpu", ["gpu", "any", "GPU:2", "cuda"])
def test_any_gpu_flag(exchange: FakeExchange, gpu: str) -> None:
    result = run("--gpu", gpu, "--no-code", "-d", "python", "train.py")
    assert result.exit_code == 0, result.output
    [spec] = exchange.submitted()
    assert spec["compute"]["gpu"]["requested"] == gpu
    assert spec["compute"]["gpu"]["count"] == (2 if gpu.endswith(":2") else 1)


def script(exchange: FakeExchange, final: str, code: int | None, reason: str | None) -> None:
    exchange.attempts["j1"] = [{"number": 1, "node_id": "n1", "node_name": "gpu-box",
                                "state": "RUNNING", "placed_at": NOW,
                                "placement": "cheapest node with an a100 ($0.00/h)"}]
    raw = "✓ done\n".encode()
    exchange.follow["j1"] = [
        sse("job", job_view("j1", "SCHEDULED", attempt=1, node_id="n1")),
        ": keep-alive\n\n",
        sse("job", job_view("j1", "STARTING", attempt=1, node_id="n1")),
        sse("job", job_view("j1", "RUNNING", attempt=1, node_id="n1")),
        sse("chunk", chunk(1, "epoch 1\n")), sse("chunk", chunk(2, "warning!\n", "stderr")),
        sse("chunk", chunk(3, raw[:2])), sse("chunk", chunk(4, raw[2:])),
        sse("end", job_view("j1", final, attempt=1, exit_code=code, reason=reason)),
    ]


def test_streams_output_and_exits_with_the_jobs_code(exchange: FakeExchange) -> None:
    script(exchange, "FAILED", 3, "exited with code 3")
    result = run("--gpu", "a100", "python", "train.py")
    assert result.exit_code == 3, result.output
    assert result.stdout == "epoch 1\n✓ done\n"
    err = result.stderr.splitlines()
    assert err[1:] == [
        "bourse: submitted j1",
        "bourse: PENDING: no node has an a100 free",
        "bourse: SCHEDULED on gpu-box (attempt 1): cheapest node with an a100 ($0.00/h)",
        "bourse: STARTING on gpu-box (attempt 1)",  # the placement is said once
        "bourse: RUNNING on gpu-box (attempt 1)",
        "warning!",
        "job j1 failed with exit code 3: exited with code 3",
    ]
    assert err[0].startswith("code: 3 files")


def test_success_exits_0(exchange: FakeExchange) -> None:
    script(exchange, "SUCCEEDED", 0, None)
    result = run("--no-code", "python", "train.py")
    assert result.exit_code == 0, result.output
    assert not any(line.startswith("job j1") for line in result.stderr.splitlines())


def test_cancelled_exits_130(exchange: FakeExchange) -> None:
    script(exchange, "CANCELLED", None, "stopped by user")
    result = run("--no-code", "x")
    assert result.exit_code == 130
    assert "job j1 was cancelled: stopped by user" in result.stderr


def test_failed_without_a_code_exits_1_with_the_reason(exchange: FakeExchange) -> None:
    script(exchange, "FAILED", None, "bundle could not be unpacked")
    result = run("--no-code", "x")
    assert result.exit_code == 1
    assert "job j1 failed: bundle could not be unpacked" in result.stderr


def test_a_gangs_output_is_prefixed_with_each_lines_rank(exchange: FakeExchange) -> None:
    exchange.follow["j1"] = [
        sse("chunk", chunk(1, "loss 0.", rank=1)), sse("chunk", chunk(2, "ready\n", rank=0)),
        sse("chunk", chunk(3, "5\n", rank=1)), sse("end", job_view("j1", "SUCCEEDED")),
    ]
    result = run("--no-code", "--nodes", "2", "python", "train.py")
    assert result.exit_code == 0, result.output
    assert exchange.submitted()[0]["compute"]["num_nodes"] == 2
    assert result.stdout == "[rank 0] ready\n[rank 1] loss 0.5\n"


def test_ctrl_c_detaches(exchange: FakeExchange) -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    exchange.on_follow = interrupt
    result = run("--no-code", "x")
    assert result.exit_code == 130
    assert "bourse logs -f j1" in result.stderr and "bourse stop j1" in result.stderr
    assert not any(r.url.path.endswith("/cancel") for r in exchange.requests)


def test_unreachable_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    monkeypatch.setattr(seam, "open_client", lambda: Client(
        "http://127.0.0.1:9", "t", transport=httpx.MockTransport(refuse)))
    result = run("--no-code", "x")
    assert result.exit_code == 1
    assert "cannot reach the exchange at http://127.0.0.1:9" in result.stderr
    assert "bourse up" in result.stderr


def test_data_flags_become_the_spec(exchange: FakeExchange) -> None:
    result = run("--no-code", "-d", "--input", "data=s3://datasets/digits/",
                 "--input", "labels=s3://datasets/labels.csv", "--output", "model=s3://res/m/",
                 "--checkpoint", "s3://res/ckpt/", "python", "train.py")
    assert result.exit_code == 0, result.output
    [spec] = exchange.submitted()
    assert spec["inputs"] == {"data": "s3://datasets/digits/",
                              "labels": "s3://datasets/labels.csv"}
    assert (spec["outputs"], spec["checkpoint"]) == ({"model": "s3://res/m/"}, "s3://res/ckpt/")


@pytest.mark.parametrize(("flags", "words"), [
    (("--input", "s3://datasets/digits/"), "is not NAME=URI"),
    (("--output", "m=s3://a/", "--output", "m=s3://b/"), "--output m is given twice"),
    (("--input", "data=ftp://x/"), "unsupported scheme"),
])
def test_bad_data_flags(exchange: FakeExchange, flags: tuple[str, ...], words: str) -> None:
    result = run("--no-code", "-d", *flags, "python", "train.py")
    assert result.exit_code == 2, result.output
    assert words in result.stderr
    assert exchange.submitted() == []


def test_the_prefetch_progress_shows_while_starting(exchange: FakeExchange) -> None:
    job = job_view("j1", "STARTING", attempt=1, progress="inputs: 1.2 GB / 2.0 GB, 310 MB/s")
    exchange.jobs["j1"] = job
    exchange.attempts["j1"] = [{"number": 1, "node_id": "n1", "node_name": "box",
                                "state": "STARTING", "placed_at": NOW}]
    status = run_status(exchange)
    assert status.describe(JobView.model_validate(job)) == (
        "STARTING on box (attempt 1) - inputs: 1.2 GB / 2.0 GB, 310 MB/s")


def run_status(exchange: FakeExchange) -> StatusLine:
    return StatusLine(Client(transport=httpx.MockTransport(exchange)))


def test_port_flags_become_the_spec(exchange: FakeExchange) -> None:
    result = run("--no-code", "-d", "--port", "8000", "--port", "6006:keep", "python", "app.py")
    assert result.exit_code == 0, result.output
    assert exchange.submitted()[0]["ports"] == [{"number": 8000, "path": "strip"},
                                                {"number": 6006, "path": "keep"}]


@pytest.mark.parametrize(("ports", "words"), [
    (("80",), "1024 to 65535"), (("6006:absolute",), "1024 to 65535"),
    (("7000", "7000"), "declare a port twice")])
def test_bad_port_flags(exchange: FakeExchange, ports: tuple[str, ...], words: str) -> None:
    flags = [flag for port in ports for flag in ("--port", port)]
    result = run("--no-code", "-d", *flags, "python", "app.py")
    assert result.exit_code == 2, result.output
    assert words in result.stderr
    assert exchange.submitted() == []
