"""deploy/: the container images, the compose file and the systemd units say what bourse runs,
and what they say runs: every command line they give is parsed by the real ``bourse server``
and ``bourse agent`` commands, every service, volume, secret and variable the compose file
names exists, and systemd itself reads the units (``systemd-analyze verify``, where it is
installed). No container engine runs here, so nothing is built: docs/self-hosting.md says what
was checked how.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from bourse.cli.agent import agent
from bourse.cli.server import server
from bourse.storage.seaweed import Ports, weed_command

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMMANDS: dict[str, click.Command] = {"server": server, "agent": agent}
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?]([^}]*))?\}")


def parses(argv: list[str]) -> click.Context:
    """``bourse ARGV`` parsed by the real command: unknown flags and bad values raise."""
    name, *args = argv
    assert name in COMMANDS, f"bourse {name}: not a command the deploy files may run"
    return COMMANDS[name].make_context(f"bourse {name}", args)


def env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def expand(text: str, values: dict[str, str]) -> str:
    """``${NAME}``, ``${NAME:-default}``, ``${NAME:?message}`` as compose and systemd expand
    them, from ``values``; a name without a value and without a default fails the test."""
    def one(found: re.Match[str]) -> str:
        name, default = found.group(1), found.group(2)
        if name in values:
            return values[name]
        assert default is not None and "-" in found.group(0), f"{name} has no value"
        return default
    return VARIABLE.sub(one, text)


# ---- compose ---------------------------------------------------------------------------------

def compose() -> dict[str, object]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def services() -> dict[str, dict[str, object]]:
    found = compose()["services"]
    assert isinstance(found, dict)
    return found


def test_compose_runs_a_coordinator_on_postgres_a_store_and_an_agent() -> None:
    assert set(services()) == {"postgres", "store", "coordinator", "agent"}
    for name, service in services().items():
        assert "image" in service, f"{name}: no image"
        assert service.get("restart") == "unless-stopped", name
        for needed in service.get("depends_on", {}):  # type: ignore[attr-defined]
            assert needed in services(), f"{name} depends on unknown {needed}"


def test_compose_names_only_declared_volumes_secrets_and_dockerfile_targets() -> None:
    declared_volumes = set(compose()["volumes"])  # type: ignore[call-overload]
    declared_secrets = set(compose()["secrets"])  # type: ignore[call-overload]
    targets = set(re.findall(r"^FROM \S+ AS (\S+)$", (DEPLOY / "Dockerfile").read_text(),
                             re.MULTILINE))
    for name, service in services().items():
        for volume in service.get("volumes", []):  # type: ignore[attr-defined]
            assert volume.split(":")[0] in declared_volumes, f"{name}: {volume}"
        assert set(service.get("secrets", [])) <= declared_secrets, name  # type: ignore[arg-type]
        build = service.get("build")
        if isinstance(build, dict):
            assert build["target"] in targets and build["dockerfile"] == "deploy/Dockerfile"
    assert {"coordinator", "agent"} <= targets


def test_every_variable_compose_needs_is_in_the_env_example() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    required = {m.group(1) for m in VARIABLE.finditer(text) if "?" in m.group(0)}
    assert required and required <= set(env_file(DEPLOY / "env.example"))


@pytest.mark.parametrize("service", ["coordinator", "agent"])
def test_compose_commands_parse_as_bourse_commands(service: str) -> None:
    values = env_file(DEPLOY / "env.example")
    argv = [expand(word, values) for word in services()[service]["command"]]  # type: ignore[attr-defined]
    ctx = parses(argv)
    if service == "coordinator":  # no password in the process list: asyncpg reads PGPASSWORD
        assert "@postgres:5432/" in ctx.params["database_url"]
        assert ":" not in ctx.params["database_url"].split("//")[1].split("@")[0]
        assert "PGPASSWORD" in services()[service]["environment"]  # type: ignore[operator]
    else:
        assert ctx.params["token_file"] == Path("/run/secrets/agent-token")


def test_the_compose_store_runs_weed_as_the_embedded_store_does() -> None:
    """deploy/store.sh passes `weed mini` the flags bourse.storage.seaweed does, so the
    external store behaves as the embedded one (IAM writes, no UIs, every port explicit)."""
    script = (DEPLOY / "store.sh").read_text()
    ours = set(re.findall(r"(?<=\s)-([A-Za-z0-9.]+)=", script))
    embedded = weed_command(Path("weed"), Path("d"), "h", Ports(*range(1, 11)), Path("s3"))
    theirs = {arg[1:].split("=")[0] for arg in embedded if arg.startswith("-")}
    assert ours == theirs
    assert subprocess.run(["sh", "-n", str(DEPLOY / "store.sh")], check=False).returncode == 0


# ---- the Dockerfile --------------------------------------------------------------------------

def test_both_images_run_as_a_user_and_install_their_extra() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = dict(re.findall(r"^FROM \S+ AS (\S+)\n(.*?)(?=^FROM |\Z)", text,
                             re.MULTILINE | re.DOTALL))
    for target, extra in (("coordinator", "server"), ("agent", "agent")):
        assert re.search(r"^USER bourse$", stages[target], re.MULTILINE), target
        assert f"[{extra}]" in stages[target], target
        cmd = re.search(r'^CMD \[(.*)\]$', stages[target], re.MULTILINE)
        assert cmd is not None
        parses([word.strip().strip('"') for word in cmd.group(1).split(",")])
    for source in re.findall(r"^COPY (?!--from)(\S+)", text, re.MULTILINE):
        assert (ROOT / source).exists(), f"COPY {source}: not in the checkout"


# ---- systemd ---------------------------------------------------------------------------------

UNITS = ("bourse-server", "bourse-agent")


def unit(name: str) -> dict[str, list[str]]:
    """Each key of a unit file with its values, continuation lines joined."""
    text = (DEPLOY / "systemd" / f"{name}.service").read_text().replace("\\\n", " ")
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def unit_environment(name: str) -> dict[str, str]:
    values = dict(word.split("=", 1) for line in unit(name)["Environment"]
                  for word in shlex.split(line))
    example = DEPLOY / "systemd" / f"{name.removeprefix('bourse-')}.env.example"
    return values | env_file(example) | {"H": "node-1"}  # %H: the host name


@pytest.mark.parametrize("name", UNITS)
def test_unit_commands_parse_as_bourse_commands(name: str) -> None:
    (exec_start,) = unit(name)["ExecStart"]
    argv = shlex.split(expand(exec_start.replace("%H", "${H}"), unit_environment(name)))
    assert argv[0] == "/opt/bourse/bin/bourse"
    parses(argv[1:])
    assert unit(name)["EnvironmentFile"] == [f"-/etc/bourse/{name.removeprefix('bourse-')}.env"]


def test_the_units_keep_what_the_design_needs() -> None:
    server_unit, agent_unit = unit("bourse-server"), unit("bourse-agent")
    assert server_unit["User"] == ["bourse"] and server_unit["NoNewPrivileges"] == ["yes"]
    assert server_unit["ProtectSystem"] == ["strict"] and server_unit["UMask"] == ["0077"]
    assert agent_unit["KillMode"] == ["process"]  # jobs outlive a restarted agent
    assert "User" not in agent_unit  # root: one uid per job
    assert "PrivateDevices" not in agent_unit  # the GPUs
    for found in (server_unit, agent_unit):
        assert found["Restart"][0] in ("on-failure", "always")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.parametrize("name", UNITS)
def test_systemd_reads_the_units_without_a_complaint(name: str, tmp_path: Path) -> None:
    """`systemd-analyze verify` on the unit, its binary pointed at this virtualenv's bourse
    (it checks that the binary exists); it exits 0 on warnings, so any output fails."""
    bourse = str(Path(sys.executable).parent / "bourse")
    text = (DEPLOY / "systemd" / f"{name}.service").read_text()
    copy = tmp_path / f"{name}.service"
    copy.write_text(text.replace("/opt/bourse/bin/bourse", bourse))
    done = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
