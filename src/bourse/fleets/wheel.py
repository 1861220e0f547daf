"""The wheel of bourse that ``bourse fleets add`` copies to each host: the coordinator's
version, so every agent of the exchange runs the code it was built with.

bourse is not on PyPI, so the hosts cannot ``pip install bourse==VERSION``. The wheel is the
one ``--wheel`` (``BOURSE_AGENT_WHEEL``) names; else one built from the source tree this
``bourse`` runs from (a checkout or an editable install: ``pip wheel --no-deps``, once, kept in
``<config dir>/wheels``). Its version must be the coordinator's. The hosts install it with its
``agent`` extra, whose dependencies come from each host's own package index configuration.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import bourse
from bourse.core.errors import InvalidInput
from bourse.sdk.contexts import config_dir


def wheel_version(wheel: Path) -> str:
    """The version a wheel's METADATA says."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            lines = archive.read(meta).decode().splitlines()
    except (OSError, zipfile.BadZipFile, StopIteration):
        raise InvalidInput(f"--wheel {wheel}: not a wheel", field="--wheel",
                           hint="give the bourse-*.whl file bourse was built as") from None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("Name", "").lower() != "bourse":
        raise InvalidInput(f"--wheel {wheel}: a wheel of {fields.get('Name')!r}, not bourse",
                           field="--wheel")
    return fields.get("Version", "")


def find_wheel(version: str, given: Path | None) -> Path:
    """The wheel of bourse ``version`` to install on the hosts (see the module's docstring)."""
    if given is not None:
        if not given.is_file():
            raise InvalidInput(f"--wheel {given}: no such file", field="--wheel")
        wheel = given
    else:
        wheel = _built(version)
    found = wheel_version(wheel)
    if found != version:
        raise InvalidInput(f"{wheel.name} is bourse {found}; the coordinator runs {version}",
                           field="--wheel", hint=f"give the wheel of bourse {version}: every "
                                                 "agent runs the coordinator's version")
    return wheel


def source_tree() -> Path | None:
    """The checkout this bourse runs from, if it runs from one."""
    root = Path(bourse.__file__).resolve().parent.parent.parent
    project = root / "pyproject.toml"
    if project.is_file() and 'name = "bourse"' in project.read_text(errors="replace"):
        return root
    return None


def _built(version: str) -> Path:
    cache = config_dir() / "wheels"
    wheel = cache / f"bourse-{version}-py3-none-any.whl"
    root = source_tree()
    if root is None:
        if wheel.is_file():
            return wheel
        raise InvalidInput("this bourse was not installed from a source tree, so no wheel "
                           "of it can be built here", field="--wheel",
                           hint=f"pass --wheel with the bourse-{version} wheel "
                                "(or set BOURSE_AGENT_WHEEL)")
    if bourse.__version__ != version:
        raise InvalidInput(f"this checkout is bourse {bourse.__version__}; the coordinator "
                           f"runs {version}", field="--wheel",
                           hint=f"pass --wheel with the bourse-{version} wheel")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as out:
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                               "--no-build-isolation", "--quiet", "-w", out, str(root)],
                              capture_output=True, text=True, check=False, timeout=600)
        made = sorted(Path(out).glob("bourse-*.whl"))
        if done.returncode != 0 or not made:
            raise InvalidInput(f"building the wheel of {root} failed: "
                               f"{(done.stderr or done.stdout).strip()[-400:]}",
                               field="--wheel", hint="build it yourself (python -m build) "
                                                     "and pass --wheel")
        made[0].replace(wheel)
    return wheel
