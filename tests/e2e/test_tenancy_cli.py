"""Tenancy end to end, through the CLI, against a real coordinator and a real agent: an admin
makes a project and a token, a member logs in, sets a secret and runs a job that prints it;
the stored logs hold it in no form, the audit trail verifies and exports, and the revoked
token is refused."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from harness import Exchange

from bourse.cli.main import cli
from bourse.sdk.client import Client
from bourse.sdk.errors import Unauthorized

pytestmark = pytest.mark.slow
SECRET = "hunter2-but-longer/+="
PRINT_IT = ('echo "token=$API_TOKEN"; printf %s "$API_TOKEN" | base64; '
            'printf %s "$API_TOKEN" | od -An -tx1 | tr -d " \\n"; echo')


def bourse(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    result = CliRunner(env=env).invoke(cli, list(args), input=stdin)
    assert result.exit_code == 0, (args, result.output)
    return result


def _member(exchange: Exchange, admin: dict[str, str], home: Path) -> tuple[dict[str, str], str]:
    bourse(admin, "projects", "create", "alpha")
    made = json.loads(bourse(admin, "tokens", "create", "--project", "alpha", "--role",
                             "member", "--expires", "30d", "--json").stdout)
    env = {"BOURSE_HOME": str(home), "BOURSE_URL": "", "BOURSE_TOKEN": ""}
    bourse(env, "login", exchange.coordinator.url, "--token", made["token"])
    contexts = home / "contexts.json"  # bourse login writes a context
    assert os.stat(contexts).st_mode & 0o777 == 0o600
    return env, made["id"]


def test_a_member_runs_a_job_with_a_secret_that_never_reaches_the_logs(
        exchange: Exchange, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = {"BOURSE_URL": exchange.coordinator.url, "BOURSE_TOKEN": exchange.coordinator.token}
    member, token_id = _member(exchange, admin, tmp_path / "home")
    bourse(member, "secrets", "set", "API_TOKEN", stdin=SECRET + "\n")
    agent = exchange.agent("n1")
    job_id = bourse(member, "run", "-d", "--no-code", "--secret", "API_TOKEN",
                    "sh", "-c", PRINT_IT).stdout.strip()
    monkeypatch.setenv("BOURSE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BOURSE_URL", raising=False)
    monkeypatch.delenv("BOURSE_TOKEN", raising=False)
    with Client() as client:  # the SDK reads what `bourse login` stored
        final = exchange.wait_job(job_id, lambda d: d.state == "SUCCEEDED", 60, "the job")
        assert final.state == "SUCCEEDED"
        stored = b"".join(base64.b64decode(c.data) for c in client.iter_logs(job_id))
    assert SECRET.encode() in agent.stdout(job_id, 1)  # the job did print it
    for form in (SECRET.encode(), base64.b64encode(SECRET.encode()),
                 SECRET.encode().hex().encode()):
        assert form not in stored, stored
    assert stored.count(b"[redacted]") == 3, stored
    _not_in_spool(agent.work_dir)
    _audit_holds(admin)
    bourse(admin, "tokens", "revoke", "--yes", token_id)
    stored = json.loads((tmp_path / "home" / "contexts.json").read_text())
    stored_token = stored["contexts"][stored["current"]]["token"]
    with Client(exchange.coordinator.url, stored_token) as client, pytest.raises(
            Unauthorized, match="revoked"):
        client.jobs()


def _not_in_spool(work_dir: Path) -> None:
    """The agent kept the start message for re-adoption, without the secret's value."""
    spools = list(work_dir.rglob("*.db"))
    assert spools
    for path in spools:
        with sqlite3.connect(path) as db:
            dump = "\n".join(db.iterdump())
        assert SECRET not in dump, path


def _audit_holds(admin: dict[str, str]) -> None:
    assert "intact" in bourse(admin, "audit", "verify").stdout
    verdict = json.loads(bourse(admin, "audit", "verify", "--json").stdout)
    assert verdict["ok"] is True and verdict["checked"] > 0 and verdict["problems"] == []
    listed = json.loads(bourse(admin, "audit", "--json", "--since", "1d").stdout)
    assert "PUT /api/v1/secrets/{name}" in {r["action"] for r in listed}
    assert SECRET not in json.dumps(listed)
    exported = bourse(admin, "audit", "export", "--csv", "--since", "1d").stdout
    rows = list(csv.DictReader(io.StringIO(exported)))
    actions = {r["action"] for r in rows}
    assert {"POST /api/v1/projects", "POST /api/v1/tokens", "PUT /api/v1/secrets/{name}",
            "POST /api/v1/jobs", "agent session"} <= actions
    assert SECRET not in exported
