"""The values a boot or install script writes on ``bourse agent``'s command line, checked
before they are quoted: the coordinator's URL, a one-time token, labels (names, regions,
providers), a network, a version, an interpreter. Shared by a launched instance's user data
(``clouds.userdata``) and an SSH fleet's install script (``fleets.script``)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from packaging.version import InvalidVersion, Version

from bourse.core.errors import InvalidInput

LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # as the agent's --region, --name
NETWORK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")  # as the agent's --network
TOKEN = re.compile(r"^[!-~]{8,512}$")  # printable ASCII, no space: one line, never a heredoc end
PYTHON = re.compile(r"^[A-Za-z0-9_./+-]{1,200}$")


def check_values(server_url: str, token: str, name: str, version: str, python: str) -> None:
    parts = urlsplit(server_url)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(
            c.isspace() for c in server_url):
        raise InvalidInput(f"{server_url!r} is not the coordinator's http(s) URL",
                           field="server_url", hint="e.g. https://bourse.example.com")
    if not TOKEN.match(token):
        raise InvalidInput("the enrolment token is not one line of printable ASCII",
                           field="enrol_token", hint="pass the token `create_token` made")
    check_label("node_name", name)
    try:
        Version(version)
        if version != version.strip():
            raise InvalidVersion(version)
    except InvalidVersion:
        raise InvalidInput(f"{version!r} is not a version bourse is published under",
                           field="version", hint="e.g. 0.1.0") from None
    if not PYTHON.match(python):
        raise InvalidInput(f"{python!r} is not an interpreter's name or path",
                           field="python", hint="e.g. python3 or /usr/bin/python3.12")


def check_label(field: str, value: str) -> None:
    if not LABEL.match(value):
        raise InvalidInput(f"{field} {value!r}: use 1-64 letters, digits, '.', '_' and '-', "
                           "starting with a letter or digit", field=field)


def systemd_unit(exec_start: str, log: str, user: str | None = None) -> str:
    """The agent's systemd unit, as a boot or install script writes it (``exec_start`` and
    ``log`` may name the script's shell variables: the unit is written from an unquoted
    heredoc). Restarted always, its own process killed alone (the jobs' shims outlive a
    restart of the agent, which takes them back)."""
    who = f"User={user}\n" if user else ""
    return ("[Unit]\nDescription=bourse node agent\nWants=network-online.target\n"
            "After=network-online.target\n\n"
            f"[Service]\n{who}ExecStart={exec_start}\nRestart=always\nRestartSec=5\n"
            f"KillMode=process\nStandardOutput=append:{log}\nStandardError=inherit\n\n"
            "[Install]\nWantedBy=multi-user.target\n")

