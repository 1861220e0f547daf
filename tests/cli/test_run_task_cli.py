"""``bourse run task.yaml``: the file becomes the job, flags before or after it override its
fields, bad files and services are refused before anything is sent, and --dry-run sends
nothing but the questions of where it would run."""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
from pathlib import Path

import pytest
from cli_exchange import FakeExchange
from click.testing import CliRunner, Result

from bourse.cli.main import cli

TASK = """\
name: digits
resources: {gpu: a100:8, cpus: 8+, region: us-east-*}
setup: echo setting up
run: [python, train.py]
env: {EPOCHS: 3, FROM_HERE: null}
secrets: [HF_TOKEN]
ports: [6006]
workdir: ..
max_retries: 1
"""
OFFER = {"id": "o1", "provider": "fleet", "instance_type": "box", "node_id": "node-1",
         "region": "local", "gpu": "a100-40gb", "gpu_count": 8, "cpus": 16,
         "memory_gib": 64, "price_per_hour": 12.5, "spot": False}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / "conf").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "conf" / "task.yaml").write_text(TASK)
    monkeypatch.chdir(root / "conf")  # the code is the file's workdir, wherever we are
    monkeypatch.setenv("FROM_HERE", "copied")
    return root


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["run", *args])


def sent(exchange: FakeExchange) -> list[str]:
    return [f"{r.method} {r.url.path}" for r in exchange.requests]


def test_a_task_file_is_submitted_as_its_job(exchange: FakeExchange, project: Path) -> None:
    exchange.secrets = ["HF_TOKEN"]
    result = run("task.yaml", "-d")
    assert result.exit_code == 0, result.output
    [spec] = exchange.submitted()
    assert spec["command"][:2] == ["bash", "-c"]
    assert spec["command"][3:] == ["bourse-task", "python", "train.py"]
    assert "echo setting up" in spec["command"][2]
    assert (spec["name"], spec["max_retries"], spec["project_secrets"]) == (
        "digits", 1, ["HF_TOKEN"])
    assert spec["env"] == {"EPOCHS": "3", "FROM_HERE": "copied"}
    assert spec["compute"]["gpu"]["count"] == 8 and spec["compute"]["regions"] == ["us-east-*"]
    [(sha, tarball)] = exchange.bundles.items()
    assert spec["bundle"] == sha
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:  # workdir: .. from conf/
        assert sorted(tar.getnames()) == ["conf", "conf/task.yaml", "train.py"]


def test_flags_before_and_after_the_file_override_it(exchange: FakeExchange,
                                                     project: Path) -> None:
    exchange.secrets = ["HF_TOKEN", "WANDB_KEY"]
    result = run("--name", "before", "--env", "EPOCHS=5", "task.yaml", "--gpu", "h100",
                 "--nodes", "2", "--name", "after", "--region", "eu-*", "--env", "NEW=1",
                 "--secret", "WANDB_KEY", "--port", "6006:keep", "--no-code", "-d",
                 "--", "--lr", "3")
    assert result.exit_code == 0, result.output
    [spec] = exchange.submitted()
    assert spec["name"] == "after"
    assert spec["env"] == {"EPOCHS": "5", "FROM_HERE": "copied", "NEW": "1"}
    assert spec["compute"]["gpu"]["requested"] == "h100" and spec["compute"]["num_nodes"] == 2
    assert spec["compute"]["regions"] == ["eu-*"]
    assert spec["compute"]["cpus"]["min"] == 8  # the file's, untouched
    assert spec["project_secrets"] == ["HF_TOKEN", "WANDB_KEY"]
    assert spec["ports"] == [{"number": 6006, "path": "keep"}]
    assert spec["command"][3:] == ["bourse-task", "python", "train.py", "--lr", "3"]
    assert spec["bundle"] is None and exchange.bundles == {}


def test_a_bad_override_is_named_as_its_flag(exchange: FakeExchange, project: Path) -> None:
    result = run("task.yaml", "--cpus", "lots")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --cpus: expected a number")
    assert exchange.requests == []


def test_a_word_after_the_file_is_not_a_command(exchange: FakeExchange, project: Path) -> None:
    result = run("task.yaml", "python", "other.py")
    assert result.exit_code == 2
    assert "a task file's command is its run: field; put arguments for it after --" in (
        result.stderr)
    assert exchange.requests == []


def test_a_bad_file_is_refused_with_where(exchange: FakeExchange, project: Path) -> None:
    (project / "conf" / "bad.yaml").write_text("run: x\nresources:\n  gpuz: a100\n")
    result = run("bad.yaml")
    assert (result.exit_code, result.stderr) == (
        2, "error: bad.yaml:3:3: resources.gpuz: unknown field; did you mean resources.gpu?\n")
    assert exchange.requests == []


def test_a_service_is_refused(exchange: FakeExchange, project: Path) -> None:
    (project / "conf" / "svc.yaml").write_text("run: x\nservice: {port: 8000}\n")
    result = run("svc.yaml")
    assert result.exit_code == 2
    assert "a service is run by `bourse serve FILE`, not `bourse run`" in result.stderr
    assert exchange.requests == []


def test_a_dry_run_says_what_it_would_take_and_sends_nothing(
        exchange: FakeExchange, project: Path) -> None:
    exchange.offers = {"offers": [OFFER, {**OFFER, "id": "o2", "price_per_hour": 20.0}],
                       "explanation": ["2 offers considered for a100:8", "2 matched"]}
    exchange.secrets = ["HF_TOKEN"]
    result = run("--dry-run", "task.yaml")
    assert result.exit_code == 0, result.output
    assert sent(exchange) == ["GET /api/v1/secrets", "POST /api/v1/offers"]
    out = result.stdout
    assert "dry run: nothing submitted" in out
    assert "runs        setup: 1 line, then run: python train.py" in out
    assert "env         EPOCHS, FROM_HERE" in out and "copied" not in out
    assert "conf/task.yaml" not in out and "2 files" in out and "(not uploaded)" in out
    assert ("would take: o1 - fleet box (node-1), 8 x a100-40gb, local, $12.5000/h" in out)
    assert "the cheapest live node that fits (2 offers fit now" in out
    assert "then: o2" in out and "2 matched" in out


def test_a_dry_run_that_fits_nowhere_exits_1_with_why_as_json(
        exchange: FakeExchange, project: Path) -> None:
    exchange.offers = {"offers": [], "explanation": ["0 offers considered", "0 matched"]}
    exchange.secrets = ["HF_TOKEN"]
    result = run("task.yaml", "--dry-run", "--json")
    assert result.exit_code == 1, result.output
    assert sent(exchange) == ["GET /api/v1/secrets", "POST /api/v1/offers", "GET /api/v1/clouds"]
    plan = json.loads(result.stdout)
    assert (plan["submitted"], plan["would_take"], plan["source"]) == (False, None, "exchange")
    assert plan["explanation"] == ["0 offers considered", "0 matched"]
    assert plan["spec"]["name"] == "digits" and plan["code"]["files"] == 2


def test_a_dry_run_without_an_exchange_asks_the_catalogues(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BOURSE_URL", raising=False)
    monkeypatch.delenv("BOURSE_TOKEN", raising=False)
    result = run("--dry-run", "--no-code", "--gpu", "a100:8", "--", "python", "t.py")
    assert result.exit_code == 0, result.output
    assert "note: no exchange to ask" in result.stdout
    assert "runs        python t.py" in result.stdout
    assert "the market sells:" in result.stdout and "8 x a100" in result.stdout


def test_json_goes_with_dry_run(exchange: FakeExchange, project: Path) -> None:
    result = run("--json", "task.yaml")
    assert result.exit_code == 2 and "--json goes with --dry-run" in result.stderr
    assert exchange.requests == []


def test_schema_has_the_kinds_it_knows() -> None:
    result = CliRunner().invoke(cli, ["schema", "tsak"])
    assert result.exit_code == 2 and "'tsak' is not 'task'" in textwrap.dedent(result.stderr)


def test_an_app_has_no_dry_run(exchange: FakeExchange, project: Path) -> None:
    (project / "conf" / "app.py").write_text("app = None\n")
    result = run("--dry-run", "app.py")
    assert result.exit_code == 2 and "not an app" in result.stderr
    assert exchange.requests == []


def test_a_local_input_is_read_from_the_file_s_directory_and_a_dry_run_uploads_nothing(
        exchange: FakeExchange, project: Path) -> None:
    (project / "conf" / "digits").mkdir()
    (project / "conf" / "digits" / "a.csv").write_text("1,2\n")
    task = project / "conf" / "local.yaml"
    task.write_text("run: python train.py\nworkdir: ..\ninputs: {data: digits/}\n")
    exchange.offers = {"offers": [OFFER], "explanation": ["1 matched"]}
    result = run("--dry-run", "--json", str(task))
    assert result.exit_code == 0, result.output
    assert sent(exchange) == ["POST /api/v1/offers"]
    shown = json.loads(result.stdout)["spec"]["inputs"]["data"]
    assert shown == (project / "conf" / "digits").resolve().as_uri()


def test_a_skypilot_file_s_local_mounts_are_its_local_inputs(
        exchange: FakeExchange, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = project / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "key").write_text("not a key\n")
    monkeypatch.setenv("HOME", str(home))
    (project / "conf" / "configs").mkdir()
    task = project / "conf" / "sky.yaml"
    task.write_text("num_nodes: 1\nfile_mounts:\n  /configs: ./configs\n"
                    "  ~/.ssh/id_rsa: ~/.ssh/key\nrun: ls /configs\n")
    exchange.offers = {"offers": [OFFER], "explanation": ["1 matched"]}
    result = run("--dry-run", "--json", str(task))
    assert result.exit_code == 0, result.output
    spec = json.loads(result.stdout)["spec"]
    assert spec["inputs"] == {"configs": (project / "conf" / "configs").resolve().as_uri(),
                              "id_rsa": (home / ".ssh" / "key").resolve().as_uri()}
    assert "__bourse_mount file_mounts./configs" in spec["command"][2]


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_a_local_mount_that_is_not_there_is_refused_by_its_field_before_anything_is_sent(
        exchange: FakeExchange, project: Path, monkeypatch: pytest.MonkeyPatch,
        dry: bool) -> None:
    monkeypatch.setenv("HOME", str(project / "home"))
    task = project / "conf" / "sky.yaml"
    task.write_text("num_nodes: 1\nfile_mounts:\n  ~/.ssh/id_rsa: ~/.ssh/key\nrun: ls\n")
    result = run(*(["--dry-run"] if dry else []), str(task), "-d")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1].startswith(
        "error: file_mounts.~/.ssh/id_rsa: ~/.ssh/key is neither a store URI nor a local path "
        f"that exists (looked at {project / 'home' / '.ssh' / 'key'})")
    assert exchange.requests == [] and exchange.bundles == {}


def test_a_local_input_flag_that_is_not_there_is_named_as_its_input(
        exchange: FakeExchange, project: Path) -> None:
    result = run("--dry-run", "--no-code", "--input", "data=./nowhere", "--", "ls")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: inputs.data: ./nowhere is neither a store URI")
    assert exchange.requests == []


@pytest.mark.parametrize(("gpu", "noted"), [("cpu", True), ("t4:1", False)])
def test_a_job_without_a_gpu_is_told_the_catalogues_price_gpu_machines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: str, noted: bool) -> None:
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BOURSE_URL", raising=False)
    monkeypatch.delenv("BOURSE_TOKEN", raising=False)
    result = run("--dry-run", "--json", "--no-code", "--gpu", gpu, "--", "echo", "hi")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["would_take"]["gpu"]  # every catalogue offer has one
    assert ("the job asks for no GPU, but the cloud catalogues list GPU machines only"
            in plan["note"]) is noted


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_a_secret_the_project_lacks_is_refused_before_anything_is_uploaded(
        exchange: FakeExchange, project: Path, dry: bool) -> None:
    exchange.secrets = ["OTHER"]
    result = run(*(["--dry-run"] if dry else []), "task.yaml", "-d")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1] == (
        "error: project_secrets: no secret 'HF_TOKEN' in this project — set it first with "
        "`bourse secrets set HF_TOKEN`")
    assert sent(exchange) == ["GET /api/v1/secrets"] and exchange.bundles == {}
