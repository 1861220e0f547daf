"""The user data a launched instance boots with: a POSIX sh script that makes it a node.

cloud-init runs it once, as root, on first boot. It creates a ``bourse`` system user, a
virtualenv with the agent at the coordinator's version (skipped when the machine image has
that version installed already), writes the one-time enrolment token to a 0600 file (it never
reaches a command line, so not the process list either), and starts ``bourse agent`` under
that user — as a systemd unit where systemd runs, else in the background with nohup —
logging to ``/var/log/bourse/agent.log``. The agent dials out; nothing listens on the node.

Every value is checked here and quoted with :func:`shlex.quote`. The script's paths can be
moved for a machine image or a test harness by setting, before it runs, ``BOURSE_BOOT_ROOT``
(a directory standing for ``/``), ``BOURSE_BOOT_USER`` (an existing user to run the agent as)
and ``BOURSE_BOOT_VENV`` (a virtualenv that has bourse). EC2 caps user data at 16 KB
(:data:`MAX_BYTES`); the script stays far below.
"""

from __future__ import annotations

import math
import re
import shlex

from bourse.core.agent_values import NETWORK, check_label, check_values, systemd_unit
from bourse.core.errors import InvalidInput
from bourse.core.interruption import base_url
from bourse.core.units import parse_share

MAX_BYTES = 16 * 1024  # EC2's limit on user data, before base64
GPUS = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}(:[1-9][0-9]{0,2})?$")  # the agent checks it
ARGS_END = "BOURSE_AGENT_ARGS"

HEAD = """\
#!/bin/sh
# bourse: make this instance a node of the exchange at {server}.
# Run once by cloud-init as root. Node {name}: {provider} {region} {zone} {instance_type},
# {market} at {price}; agent bourse=={version}.
set -eu
ROOT="${{BOURSE_BOOT_ROOT:-}}"
AGENT_USER="${{BOURSE_BOOT_USER:-bourse}}"
VENV="${{BOURSE_BOOT_VENV:-$ROOT/opt/bourse/venv}}"
STATE="$ROOT/var/lib/bourse"
CONF="$ROOT/etc/bourse"
LOGS="$ROOT/var/log/bourse"
VERSION={version_q}
PYTHON={python_q}
say() {{ printf 'bourse boot: %s\\n' "$*" >&2; }}
case "$ROOT$VENV$AGENT_USER" in *"'"*|*'\\'*) say "no quotes in paths"; exit 2;; esac
is_root() {{ [ "$(id -u)" = 0 ]; }}
own() {{ if is_root; then chown "$AGENT_USER" "$@"; fi; }}
"""

USER = """\
if is_root && ! id -u "$AGENT_USER" >/dev/null 2>&1; then
  say "creating the system user $AGENT_USER"
  useradd --system --user-group --home-dir "$STATE" --shell /usr/sbin/nologin "$AGENT_USER" \\
    || adduser -S -D -H -h "$STATE" "$AGENT_USER"
fi
mkdir -p "$STATE/agent" "$CONF" "$LOGS"
own "$STATE" "$STATE/agent" "$LOGS"
"""

INSTALL = """\
installed() {
  [ -x "$VENV/bin/bourse" ] && "$VENV/bin/python" -c \\
    'import importlib.metadata as m, sys; sys.exit(m.version("bourse") != sys.argv[1])' \\
    "$VERSION" 2>/dev/null
}
if installed; then
  say "bourse $VERSION is installed in $VENV"
else
  say "installing bourse[agent]==$VERSION in $VENV"
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "bourse[agent]==$VERSION"
fi
"""

# the token goes through a quoted heredoc: a file, never an argument (cat is given none)
TOKEN_FILE = """\
(umask 077 && cat > "$CONF/enrol-token" <<'BOURSE_TOKEN'
{token}
BOURSE_TOKEN
)
own "$CONF/enrol-token"
"""

# the agent's command line, for systemd and nohup alike: the paths expand here, the
# coordinator's values are quoted by Python and written as they are
LAUNCHER = """\
cat > "$CONF/agent" <<BOURSE_PATHS
#!/bin/sh
HOME='$STATE' && export HOME
exec '$VENV/bin/bourse' agent --token-file '$CONF/enrol-token' --work-dir '$STATE/agent' \\\\
BOURSE_PATHS
cat >> "$CONF/agent" <<'{end}'
  {args}
{end}
chmod 0755 "$CONF/agent"
"""

# KillMode=process: jobs run in sessions of their own and outlive an agent restart by design
START = ("""\
if [ "${BOURSE_BOOT_FOREGROUND:-}" = 1 ]; then
  say "starting the agent in the foreground (a container's main process); it logs here"
  if is_root && [ "$AGENT_USER" != "$(id -un)" ]; then
    exec runuser -u "$AGENT_USER" -- /bin/sh "$CONF/agent"
  fi
  exec /bin/sh "$CONF/agent"
elif [ -d "$ROOT/run/systemd/system" ] && command -v systemctl >/dev/null 2>&1; then
  cat > "$ROOT/etc/systemd/system/bourse-agent.service" <<BOURSE_UNIT
""" + systemd_unit("/bin/sh $CONF/agent", "$LOGS/agent.log", "$AGENT_USER") + """BOURSE_UNIT
  systemctl daemon-reload
  systemctl enable --now bourse-agent.service
  say "started the bourse-agent unit; its log: $LOGS/agent.log"
else
  if is_root && [ "$AGENT_USER" != "$(id -un)" ]; then
    nohup runuser -u "$AGENT_USER" -- /bin/sh "$CONF/agent" >>"$LOGS/agent.log" 2>&1 </dev/null &
  else
    nohup /bin/sh "$CONF/agent" >>"$LOGS/agent.log" 2>&1 </dev/null &
  fi
  echo "$!" > "$STATE/agent.pid"
  say "started the agent (pid $!); its log: $LOGS/agent.log"
fi
""")


def user_data(*, server_url: str, enrol_token: str, node_name: str, version: str,
              provider: str, region: str, zone: str | None, instance_type: str, spot: bool,
              spot_price: float | None, price: float | None, python: str = "python3",
              metadata_url: str | None = None, gpus: str | None = None,
              network: str | None = None, declared_sla: float | None = None) -> str:
    """The boot script of one launched instance (see the module's docstring). ``gpus``: what
    the offer claims (``h100-80gb:8``), declared by the agent so verification checks it.
    ``network``: a gang member's ``--network``; its ``--address`` is left to the agent's
    default, the address the machine reaches the coordinator from (on a cloud, its private
    address, which its gang peers in the same network reach). ``declared_sla``: the
    availability its cloud declares (``--cloud-sla``), passed on as ``--declare-sla``."""
    check_values(server_url, enrol_token, node_name, version, python)
    if network is not None and not NETWORK.match(network):
        raise InvalidInput(f"network {network!r}: use 1-128 letters, digits, '.', '_', ':', "
                           "'/' and '-', starting with a letter or digit", field="network")
    for field, value in (("provider", provider), ("region", region), ("zone", zone),
                         ("instance_type", instance_type)):
        if value is not None:
            check_label(field, value)
    if gpus is not None and not GPUS.match(gpus):
        raise InvalidInput(f"gpus {gpus!r} is not a GPU label such as h100-80gb:8",
                           field="gpus")
    for field, amount, least in (("spot_price", spot_price, 0.0), ("price", price, -1.0)):
        # a cluster's pods may be free (price 0); a spot bid never is
        if amount is not None and not (math.isfinite(amount) and least < amount <= 10_000):
            raise InvalidInput(f"{field} {amount!r} is not a price in $/h", field=field)
    if declared_sla is not None:
        parse_share(declared_sla, field="declared_sla")  # (0, 1]
    args = agent_args(server_url=server_url, node_name=node_name, provider=provider,
                      region=region, spot=spot, spot_price=spot_price or price,
                      metadata_url=None if metadata_url is None else _metadata(metadata_url),
                      gpus=gpus, network=network, declared_sla=declared_sla)
    script = "".join((
        HEAD.format(server=server_url, name=node_name, provider=provider, region=region,
                    zone=zone or "(any zone)", instance_type=instance_type,
                    market="spot" if spot else "on demand", price=_price(price),
                    version=version, version_q=shlex.quote(version),
                    python_q=shlex.quote(python)),
        USER, INSTALL, TOKEN_FILE.format(token=enrol_token),
        LAUNCHER.format(args=shlex.join(args), end=ARGS_END), START))
    if len(script.encode()) > MAX_BYTES:  # only a very long URL could get here
        raise InvalidInput(f"the user data is {len(script.encode())} bytes, over EC2's "
                           f"{MAX_BYTES}", field="server_url", hint="use a shorter URL")
    return script


def agent_args(*, server_url: str, node_name: str, provider: str, region: str, spot: bool,
               spot_price: float | None, metadata_url: str | None,
               gpus: str | None = None, network: str | None = None,
               declared_sla: float | None = None) -> list[str]:
    """``bourse agent``'s options past the token file and the work dir."""
    args = ["--server", server_url.rstrip("/"), "--name", node_name, "--provider", provider,
            "--region", region]
    if gpus is not None:
        args += ["--declare-gpus", gpus]
    if network is not None:
        args += ["--network", network]
    if declared_sla is not None:
        args += ["--declare-sla", f"{declared_sla:g}"]
    if spot:
        args += ["--interruptible", "--spot-notice", "imds"]
        if spot_price is not None:
            args += ["--spot-price", f"{spot_price:g}"]
        if metadata_url is not None:
            args += ["--metadata-url", metadata_url]
    return args


def _metadata(url: str) -> str:
    try:
        return base_url(url)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="metadata_url") from None


def _price(price: float | None) -> str:
    return "an unknown price" if price is None else f"${price:g}/h"
