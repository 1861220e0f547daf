"""Job environments: the packages a job's Compute names, in a virtualenv made with ``uv``.

Environments are cached on the node by the hash of their *resolved* requirements (every
package pinned by ``uv pip compile``), so two jobs asking for the same things share one, and a
job whose environment exists starts without installing anything (a file check). The request
itself is also remembered (for a day) so that the warm path does not even resolve again.
``torch`` comes from the PyTorch index of the CUDA build the node's driver runs
(``core.cuda.torch_wheel_index``), or its CPU build on a node without GPUs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bourse.agent.indexes import PackageSources
from bourse.core.errors import BourseError

REQUEST_TTL_S = 24 * 3600.0
Step = Callable[[str, int], None]  # ("resolving" | "installing", number of packages)
_TORCH = re.compile(r"^torch(\W|$)", re.IGNORECASE)


class EnvironmentError_(BourseError):
    """The job's environment could not be built (reported as the attempt's start failure)."""


@dataclass(frozen=True)
class Environment:
    path: Path  # the virtualenv
    key: str  # hash of the resolved requirements
    built: bool  # False when it was already there
    packages: int = 0  # pinned packages in it

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def env(self, path: str | None = None) -> dict[str, str]:
        """Variables that put the environment first on ``path`` (default: the agent's PATH)."""
        path = os.environ.get("PATH", "") if path is None else path
        return {"VIRTUAL_ENV": str(self.path), "PATH": f"{self.path / 'bin'}{os.pathsep}{path}"}


def request_key(packages: Sequence[str], index: str | None, python: str,
                sources: Sequence[str] = ()) -> str:
    normalised = sorted({p.strip().lower() for p in packages if p.strip()})
    blob = json.dumps({"packages": normalised, "index": index, "python": python,
                       "sources": list(sources)})
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def resolved_key(lock: str, python: str) -> str:
    lines = [ln for ln in lock.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    blob = json.dumps({"lock": lines, "python": python})
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def names_torch(packages: Sequence[str]) -> bool:
    return any(_TORCH.match(p.strip()) for p in packages)


def find_uv() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


class EnvManager:
    def __init__(self, root: Path, python: str = sys.executable, uv: str | None = None,
                 sources: PackageSources | None = None, site: str | None = None) -> None:
        """``python``: what environments are built on; ``site``: its site-packages, which
        they see behind their own (default: the agent's)."""
        self.root, self.python = root, python
        self.site = site or sysconfig.get_paths()["purelib"]
        self.uv = uv or find_uv()
        self.sources = sources or PackageSources()
        self._locks: dict[str, asyncio.Lock] = {}

    def _requests(self) -> Path:
        return self.root / "requests"

    async def ensure(self, packages: Sequence[str], torch_index: str | None = None,
                     now: float | None = None, on_step: Step | None = None) -> Environment:
        """The environment for ``packages``, built unless it exists; ``on_step`` hears of
        the slow steps (resolving, installing) when they happen."""
        now = time.time() if now is None else now
        step = on_step or (lambda _name, _count: None)
        index = torch_index if names_torch(packages) else None
        request = request_key(packages, index, self.python, self.sources.uv_args())
        async with self._locks.setdefault(request, asyncio.Lock()):
            known = self._known(request, now)
            if known is not None:
                return self._environment(known, built=False)
            step("resolving", len(packages))
            lock = await self._resolve(packages, index)
            key = resolved_key(lock, self.python)
            built = not (self.root / "envs" / key / ".complete").exists()
            if built:
                step("installing", len(pinned(lock)))
                await self._build(key, lock, index)
            self._remember(request, key, now)
            return self._environment(key, built)

    def _environment(self, key: str, built: bool) -> Environment:
        path = self.root / "envs" / key
        try:
            count = len(pinned((path / ".complete").read_text()))
        except OSError:
            count = 0
        return Environment(path, key, built, count)

    def _known(self, request: str, now: float) -> str | None:
        path = self._requests() / request
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        key = str(record["key"])
        fresh = now - float(record["at"]) < REQUEST_TTL_S
        return key if fresh and (self.root / "envs" / key / ".complete").exists() else None

    def _remember(self, request: str, key: str, now: float) -> None:
        self._requests().mkdir(parents=True, exist_ok=True)
        tmp = self._requests() / f".{request}.tmp"
        tmp.write_text(json.dumps({"key": key, "at": now}))
        os.replace(tmp, self._requests() / request)

    async def _resolve(self, packages: Sequence[str], index: str | None) -> str:
        requirements = self.root / "tmp" / f"req-{os.getpid()}-{id(packages)}.in"
        requirements.parent.mkdir(parents=True, exist_ok=True)
        requirements.write_text("\n".join(packages) + "\n")
        try:
            out = await self._uv("pip", "compile", "--quiet", "--python", self.python,
                                 *self.sources.uv_args(), *_index_args(index),
                                 str(requirements))
        finally:
            requirements.unlink(missing_ok=True)
        return out

    async def _build(self, key: str, lock: str, index: str | None) -> None:
        final = self.root / "envs" / key
        staging = self.root / "envs" / f".{key}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        locked = self.root / "tmp" / f"{key}.txt"
        locked.parent.mkdir(parents=True, exist_ok=True)
        locked.write_text(lock)
        try:
            await self._uv("venv", "--quiet", "--python", self.python, str(staging))
            _see_agent_packages(staging, self.site)
            await self._uv("pip", "install", "--quiet", "--python",
                           str(staging / "bin" / "python"), *self.sources.uv_args(),
                           *_index_args(index), "-r", str(locked))
            (staging / ".complete").write_text(lock)
            shared(staging)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            locked.unlink(missing_ok=True)

    async def _uv(self, *args: str) -> str:
        if self.uv is None:
            raise EnvironmentError_("the job names packages but uv is not installed on "
                                    "this node", hint="pip install uv next to the agent")
        proc = await asyncio.create_subprocess_exec(
            self.uv, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            detail = err.decode(errors="replace").strip().splitlines()[-3:]
            raise EnvironmentError_(f"uv {args[0]} {args[1] if len(args) > 1 else ''} failed: "
                                    + " / ".join(detail))
        return out.decode()


def pinned(lock: str) -> list[str]:
    """The ``name==version`` lines of a lock (``uv pip compile`` output)."""
    return [ln.strip() for ln in lock.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#") and "==" in ln]


def shared(top: Path) -> None:
    """Readable (and where executable, runnable) by every job user, writable by none but the
    agent, whatever its umask: environments are shared by jobs that run as their own users."""
    for above in (top.parent, top.parent.parent):  # envs/, the manager's root
        os.chmod(above, 0o755)
    for folder, _dirs, files in os.walk(top):
        os.chmod(folder, 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                mode = os.stat(path).st_mode
                os.chmod(path, 0o755 if mode & stat.S_IXUSR else 0o644)


def _see_agent_packages(venv: Path, purelib: str) -> None:
    """Let the job import what the node's Python has (bourse itself for app stages,
    torch...) behind its own packages: its site dir (``purelib``) is added after the venv's
    own, with its .pth files (editable installs) processed."""
    line = f"import site; site.addsitedir({purelib!r})\n"
    for site in (venv / "lib").glob("python*/site-packages"):
        (site / "_bourse_agent_packages.pth").write_text(line)


def _index_args(index: str | None) -> list[str]:
    # the PyTorch index only adds torch's builds; everything else still comes from PyPI
    return ["--extra-index-url", index, "--index-strategy", "unsafe-best-match"] if index else []
