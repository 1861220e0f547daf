"""The scripts ``bourse fleets`` runs on an SSH fleet's hosts: POSIX ``sh``, sent on ssh's
standard input (``sh -s``), so the enrolment token is in no command line on either side.

:func:`install_script` installs the agent at the coordinator's version (from a wheel copied
beside it, into ``~/.bourse/agent-venv``, or ``/opt/bourse/agent-venv`` for root, whose jobs
run as users of their own who must reach it; or checks the interpreter ``--agent-python`` names),
writes the one-time token to ``~/.bourse/enrol-token`` (0600, through a quoted heredoc), and
starts ``bourse agent --token-file ...``: as the systemd unit ``bourse-agent.service`` where
systemd runs and the SSH user is root, else detached (``setsid nohup``, its pid in
``~/.bourse/agent.pid``), logging to ``~/.bourse/agent.log``. :func:`stop_script` stops it
again. Each step prints ``bourse-step NAME`` before it runs and a failure ``bourse-failed NAME:
WHY`` (exit 3), which :func:`outcome` reads back. Every value is checked and quoted here.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from bourse.core.agent_values import (
    LABEL,
    NETWORK,
    PYTHON,
    TOKEN,
    check_values,
    systemd_unit,
)
from bourse.core.units import parse_share

WHEEL = re.compile(r"^bourse-[A-Za-z0-9_.+!-]+-py3-none-any\.whl$")
STEPS = ("prepare", "install", "token", "start")
FAILED = 3  # the scripts' exit status when a step failed (ssh's own failures are 255)

HEAD = """\
set -u
BASE="$HOME/.bourse"
step() { printf 'bourse-step %s\\n' "$1"; }
fail() { printf 'bourse-failed %s: %s\\n' "$1" "$2"; exit 3; }
is_root() { [ "$(id -u)" = 0 ]; }
# root's agent works where job users can reach it (as `bourse agent` chooses by default);
# the host's own BOURSE_AGENT_WORK_DIR (the agent's variable) moves it
if is_root; then WORK=/var/lib/bourse/agent; else WORK="$BASE/agent"; fi
WORK="${BOURSE_AGENT_WORK_DIR:-$WORK}"
has_systemd() { is_root && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }
UNIT=/etc/systemd/system/bourse-agent.service
stop_agent() {
  if [ -f "$UNIT" ] && is_root && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now bourse-agent.service >/dev/null 2>&1
    rm -f "$UNIT" && systemctl daemon-reload
  fi
  if [ -f "$BASE/agent.pid" ]; then
    pid=$(cat "$BASE/agent.pid")
    if kill -TERM "$pid" 2>/dev/null; then
      n=0; while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n+1)); done
      kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$BASE/agent.pid"
  fi
}
"""

PREPARE = """\
step prepare
(umask 077 && mkdir -p "$BASE") || fail prepare "cannot create $BASE"
stop_agent
rm -f "$WORK/node.json"  # the new token makes a new node: an old one may be drained
"""

# {python}: '' to install from the wheel; {wheel}: its file name in ~/.bourse/wheels
INSTALL = """\
step install
VERSION={version}
PY={python}
if [ -z "$PY" ]; then
  command -v python3 >/dev/null 2>&1 || fail install "no python3 on the host's PATH"
  # root's jobs run as users of their own: their python must be where every user reaches it
  if is_root; then VENV=/opt/bourse/agent-venv; else VENV="$BASE/agent-venv"; fi
  VENV="${{BOURSE_AGENT_VENV:-$VENV}}"  # the host's own choice, from its environment
  if [ ! -x "$VENV/bin/python" ]; then
    (umask 022 && python3 -m venv "$VENV") >>"$BASE/install.log" 2>&1 || fail install \\
      "python3 -m venv failed (see ~/.bourse/install.log; Debian, Ubuntu: apt install python3-venv)"
  fi
  (umask 022 && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \\
    "$BASE/wheels/"{wheel}"[agent]") >>"$BASE/install.log" 2>&1 || fail install \\
    "pip install of bourse[agent] failed (see ~/.bourse/install.log on the host)"
  PY="$VENV/bin/python"
fi
found=$("$PY" -c 'import importlib.metadata as m; print(m.version("bourse"))' 2>/dev/null) \\
  || fail install "$PY has no bourse installed"
[ "$found" = "$VERSION" ] || fail install "$PY has bourse $found, the coordinator runs $VERSION"
"$PY" -c 'import psutil, bourse.agent.daemon' >/dev/null 2>&1 \\
  || fail install "$PY lacks the agent's packages: install bourse[agent]=={version_text} there"
"""

TOKEN_FILE = """\
step token
(umask 077 && cat > "$BASE/enrol-token" <<'BOURSE_TOKEN'
{token}
BOURSE_TOKEN
) || fail token "cannot write $BASE/enrol-token"
"""

START = """\
step start
cat > "$BASE/agent.sh" <<BOURSE_PATHS || fail start "cannot write $BASE/agent.sh"
#!/bin/sh
# the token until it is spent (then removed): a restart, or a reboot, needs none
if [ -f '$BASE/enrol-token' ]; then set -- --token-file '$BASE/enrol-token'; fi
exec '$PY' -m bourse agent "\\$@" --work-dir '$WORK' \\\\
BOURSE_PATHS
cat >> "$BASE/agent.sh" <<'BOURSE_AGENT_ARGS'
  {args}
BOURSE_AGENT_ARGS
if has_systemd; then
  cat > "$UNIT" <<BOURSE_UNIT || fail start "cannot write $UNIT"
{unit}BOURSE_UNIT
  systemctl daemon-reload && systemctl enable --now bourse-agent.service >/dev/null 2>&1 \\
    || fail start "systemctl could not start bourse-agent.service (journalctl -u bourse-agent)"
  echo "bourse-started systemd bourse-agent.service"
else
  if command -v setsid >/dev/null 2>&1; then
    setsid nohup /bin/sh "$BASE/agent.sh" >>"$BASE/agent.log" 2>&1 </dev/null &
  else
    nohup /bin/sh "$BASE/agent.sh" >>"$BASE/agent.log" 2>&1 </dev/null &
  fi
  echo "$!" > "$BASE/agent.pid"
  sleep 1
  ended=$(tail -n 3 "$BASE/agent.log" | tr '\\n' ' ')
  kill -0 "$!" 2>/dev/null || fail start "the agent exited at once: $ended"
  echo "bourse-started process $!"
fi
"""

# the jobs too: they run in sessions of their own (a shim's pid is its group's id), and the
# node is gone once its agent is (a drain let them finish first)
STOP = """\
stop_agent
for f in "$WORK"/jobs/*/*/pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f"); dir=${f%/pid}
  tr '\\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir" && kill -KILL "-$pid"
done
rm -f "$BASE/enrol-token"
echo bourse-stopped
"""

FORGET_TOKEN = 'rm -f "$HOME/.bourse/enrol-token"'  # spent once the agent enrolled
AGENT_LOG = 'tail -n 20 "$HOME/.bourse/agent.log" 2>/dev/null'


@dataclass(frozen=True)
class HostAgent:
    """What one host's agent is started with."""

    server_url: str
    token: str
    node_name: str
    version: str
    fleet: str
    region: str
    network: str | None = None  # the fleet's, when its hosts reach each other
    agent_python: str | None = None  # an interpreter on the host that has bourse[agent]
    wheel: str | None = None  # the wheel's file name in ~/.bourse/wheels
    declared_sla: float | None = None  # the fleet's declared availability, 0..1


def install_script(agent: HostAgent) -> str:
    """The script that installs, enrols and starts the agent on one host."""
    check_values(agent.server_url, agent.token, agent.node_name, agent.version,
           agent.agent_python or "python3")
    for field, value in (("fleet", agent.fleet), ("region", agent.region)):
        if not LABEL.match(value):
            raise ValueError(f"{field} {value!r} is not a label")
    if agent.network is not None and not NETWORK.match(agent.network):
        raise ValueError(f"network {agent.network!r} is not a network name")
    if agent.agent_python is None and (agent.wheel is None or not WHEEL.match(agent.wheel)):
        raise ValueError(f"{agent.wheel!r} is not a wheel of bourse")
    if agent.agent_python is not None and not PYTHON.match(agent.agent_python):
        raise ValueError(f"{agent.agent_python!r} is not an interpreter's path")
    assert TOKEN.match(agent.token)  # _check refused any other: one line, no heredoc end
    args = ["--server", agent.server_url.rstrip("/"), "--name", agent.node_name,
            "--provider", agent.fleet, "--region", agent.region]
    if agent.network is not None:
        args += ["--network", agent.network]
    if agent.declared_sla is not None:
        sla = parse_share(agent.declared_sla, field="declared_sla")  # (0, 1]
        args += ["--declare-sla", f"{sla:g}"]
    return "".join((
        HEAD, PREPARE,
        INSTALL.format(version=shlex.quote(agent.version), version_text=agent.version,
                       python=shlex.quote(agent.agent_python or ""),
                       wheel=shlex.quote(agent.wheel or "")),
        TOKEN_FILE.format(token=agent.token), START.format(args=shlex.join(args),
                                  unit=systemd_unit("/bin/sh $BASE/agent.sh", "$BASE/agent.log"))))


def stop_script() -> str:
    """The script that stops the agent ``install_script`` started, and forgets its token."""
    return HEAD + STOP


@dataclass(frozen=True)
class Outcome:
    ok: bool
    step: str  # the last step it reached
    detail: str  # how it started (ok), or why that step failed


def outcome(returncode: int, stdout: str) -> Outcome:
    """What a script's run says: the step it failed at and why, or how the agent started."""
    steps = [line.split(None, 1)[1] for line in stdout.splitlines()
             if line.startswith("bourse-step ") and len(line.split(None, 1)) == 2]
    failed = next((line for line in stdout.splitlines() if line.startswith("bourse-failed ")),
                  None)
    if failed is not None:
        name, _, why = failed.removeprefix("bourse-failed ").partition(": ")
        return Outcome(False, name, why)
    started = next((line.removeprefix("bourse-started ") for line in stdout.splitlines()
                    if line.startswith("bourse-started ")), None)
    if returncode == 0 and started is not None:
        return Outcome(True, "start", started)
    last = steps[-1] if steps else "prepare"
    return Outcome(False, last, f"the script stopped (exit status {returncode})")
