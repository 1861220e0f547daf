"""Data in and out with the CLI, end to end, against a real coordinator, its embedded store and
a real agent: a member puts a dataset in with `bourse cp`, lists it, a job reads it and writes
a model, the model comes out with `bourse cp`; a local directory as an input goes up once; a
member of another project can neither list nor copy the first one's home; credentials a
command was given stop working once it is done."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from dataplane_harness import DataExchange

from bourse.cli.main import cli
from bourse.sdk.client import Client
from bourse.sdk.data import grant_settings
from bourse.sdk.inputs import resolve_local_inputs
from bourse.storage import AccessDenied, open_store, parse_uri
from bourse.storage.seaweed import load_root_key

pytestmark = pytest.mark.slow
TRAIN = ('cat "$BOURSE_INPUT_DATA"/a.txt "$BOURSE_INPUT_DATA"/sub/b.txt > '
         '"$BOURSE_OUTPUT_MODEL"/weights.txt')


def bourse(env: dict[str, str], *args: str, code: int = 0, stdin: str | None = None) -> Result:
    result = CliRunner(env=env).invoke(cli, list(args), input=stdin)
    assert result.exit_code == code, (args, result.output)
    return result


def _member(dx: DataExchange, project: str) -> tuple[dict[str, str], Client]:
    admin = dx.exchange.client
    admin.create_project(project)
    token = admin.create_token(project).token
    return ({"BOURSE_URL": admin.url, "BOURSE_TOKEN": token},
            Client(admin.url, token, timeout=10))


def _dataset(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "sub" / "b.txt").write_text("beta\n")
    return root


def test_a_dataset_goes_in_a_job_trains_on_it_and_its_model_comes_out(
        dx: DataExchange, tmp_path: Path) -> None:
    env, _ = _member(dx, "alpha-cp")
    home = "s3://bourse/projects/alpha-cp/"
    data = _dataset(tmp_path / "digits")
    first = json.loads(bourse(env, "cp", "-r", "--json", str(data), home + "digits/").stdout)
    again = json.loads(bourse(env, "cp", "-r", "--json", str(data), home + "digits/").stdout)
    listed = json.loads(bourse(env, "ls", "-r", "--json", home + "digits/").stdout)
    level = bourse(env, "ls", home + "digits/").stdout.split()

    job = bourse(env, "run", "-d", "--no-code", "--input", f"data={home}digits/",
                 "--output", f"model={home}model/", "sh", "-c", TRAIN).stdout.strip()
    final = dx.exchange.wait_ended(job, 60)
    assert final.state == "SUCCEEDED", final.reason
    bourse(env, "cp", "-r", home + "model/", str(tmp_path / "out") + "/")
    bourse(env, "rm", "-r", home + "digits/", code=2)  # no terminal to ask on: pass --yes
    deleted = json.loads(bourse(env, "rm", "-r", "-y", "--json", home + "digits/").stdout)

    assert (first["copied"], first["skipped"], again["copied"], again["skipped"]) == (2, 0, 0, 2)
    assert sorted(o["key"] for o in listed) == ["projects/alpha-cp/digits/a.txt",
                                                "projects/alpha-cp/digits/sub/b.txt"]
    assert level == ["NAME", "sub/", "a.txt"]
    assert (tmp_path / "out" / "weights.txt").read_text() == "alpha\nbeta\n"
    assert len(deleted["deleted"]) == 2
    assert not dx.s3.list_objects_v2(Bucket="bourse", Prefix="projects/alpha-cp/digits/").get(
        "Contents")


def test_a_local_input_goes_up_once_and_another_project_cannot_reach_it(
        dx: DataExchange, tmp_path: Path) -> None:
    _, gamma = _member(dx, "gamma-cp")
    beta_env, _ = _member(dx, "beta-cp")
    data = _dataset(tmp_path / "local")
    uploaded: list[int] = []

    def report(_name: str, _plan: Any, result: Any) -> None:
        uploaded.append(len(result.copied))

    one = resolve_local_inputs(gamma, {"data": str(data), "keep": "s3://datasets/x/"},
                               report=report)
    two = resolve_local_inputs(gamma, {"data": str(data)}, report=report)
    refused_ls = bourse(beta_env, "ls", one["data"], code=2)
    refused_cp = bourse(beta_env, "cp", "-r", one["data"], str(tmp_path / "stolen"), code=2)
    refused_write = bourse(beta_env, "cp", str(data / "a.txt"), one["data"], code=2)

    assert one["data"].startswith("s3://bourse/projects/gamma-cp/inputs/")
    assert one["keep"] == "s3://datasets/x/" and two["data"] == one["data"]
    assert uploaded == [2, 0]  # the second run uploads nothing
    for refused in (refused_ls, refused_cp, refused_write):
        assert "belongs to another project" in refused.output, refused.output
    assert not (tmp_path / "stolen").exists()


def test_credentials_stop_working_once_revoked(dx: DataExchange, tmp_path: Path) -> None:
    _, delta = _member(dx, "delta-cp")
    where = "s3://bourse/projects/delta-cp/notes/"
    grant = delta.data_credentials(write=[where], ttl_s=120)
    store = open_store(parse_uri(where), grant_settings(grant))

    async def write_and_list() -> None:
        await store.put("projects/delta-cp/notes/n.txt", b"note")
        await store.list("projects/delta-cp/notes/")

    asyncio.run(write_and_list())
    with pytest.raises(AccessDenied):
        asyncio.run(store.list("projects/"))  # outside the grant
    delta.revoke_data_credentials(grant.id)
    with pytest.raises(AccessDenied):
        asyncio.run(write_and_list())
    ports = json.loads((dx.store_dir / "ports.json").read_text())
    assert grant.store.endpoint == f"http://127.0.0.1:{ports['s3']}"
    assert grant.store.access_key_id != load_root_key(dx.store_dir).access_key_id
