"""Installed size of each variant of bourse, each in a fresh virtualenv.

The client (``pip install bourse``) beside the coordinator, the agent and both together
(``bourse[server,agent]``: what ``pip install bourse`` installed before the client was split
off, the baseline). The figure is what the install puts on disk as ``du`` counts it (MB,
10^6 bytes): the virtualenv's site-packages and bin/ (``weed`` and ``uv`` are binaries there),
without pip and setuptools, which every virtualenv starts with. Installed the way a user
installs (bytecode compiled), from one wheel built from the checkout.

    python benchmarks/install_size.py [--variants client,server,agent,server+agent]
                                      [--wheel dist/bourse-0.1.0-py3-none-any.whl]
    python benchmarks/install_size.py --venv VENV [--max-mb 60]   # measure one, check it

Target (issue 21): the client under 60 MB. .ci/clean-install runs the second form on its
client virtualenv.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"client": "", "server": "[server]", "agent": "[agent]",
            "server+agent": "[server,agent]", "train": "[train]"}
BASELINE = "server+agent"
# what every virtualenv has before anything is installed (Python 3.11: pip and setuptools)
SEED = ("pip", "setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence.pth")
SEED_SCRIPTS = ("pip", "pip3", "activate", "Activate.ps1")
MB = 1_000_000


def disk_usage(path: Path) -> int:
    """Bytes on disk under ``path``, as ``du`` counts them (allocated blocks, links once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for entry in [path, *path.rglob("*")] if path.is_dir() else [path]:
        st = entry.lstat()
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def _seeded(name: str) -> bool:
    stem = name.partition("-")[0] if name.endswith(".dist-info") else name
    return stem in SEED or name in SEED


def measure(venv: Path) -> dict[str, int]:
    """Bytes on disk of each top-level entry of the venv's site-packages and bin/ that the
    install added (``bin/`` as one entry per file)."""
    sizes: dict[str, int] = {}
    for site in sorted((venv / "lib").glob("python*/site-packages")):
        for entry in site.iterdir():
            if not _seeded(entry.name) and entry.name != "__pycache__":
                sizes[entry.name] = disk_usage(entry)
    for script in sorted((venv / "bin").iterdir()):
        if script.name.startswith(("python", *SEED_SCRIPTS)) or script.is_symlink():
            continue
        sizes[f"bin/{script.name}"] = disk_usage(script)
    return sizes


def report(name: str, sizes: dict[str, int], seconds: float | None = None) -> float:
    total = sum(sizes.values()) / MB
    biggest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
    took = f"  (installed in {seconds:.0f} s)" if seconds is not None else ""
    print(f"{name:<14} {total:8.1f} MB{took}")
    print("               biggest: " + ", ".join(f"{n} {s / MB:.1f}" for n, s in biggest))
    return total


def build_wheel(into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(into), str(ROOT)], check=True)
    return next(into.glob("bourse-*.whl"))


def install(wheel: Path, extras: str, venv: Path) -> float:
    """A fresh virtualenv with ``wheel`` and ``extras`` in it; the seconds it took."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = os.environ | {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                    f"{wheel}{extras}"], check=True, env=env)
    return time.monotonic() - started


def compare(variants: list[str], wheel: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="bourse-install-size-") as tmp:
        wheel = wheel or build_wheel(Path(tmp) / "dist")
        print(f"installed size from {wheel.name} (fresh virtualenvs, Python "
              f"{sys.version_info.major}.{sys.version_info.minor})")
        totals = {}
        for name in dict.fromkeys([*variants, BASELINE]):
            venv = Path(tmp) / name.replace("+", "-")
            seconds = install(wheel, VARIANTS[name], venv)
            totals[name] = report(name, measure(venv), seconds)
        base = totals[BASELINE]
        print(f"baseline (everything, as before the split): {base:.1f} MB")
        for name in variants:
            print(f"  {name}: {totals[name] / base:.0%} of it")


def check(venv: Path, max_mb: float | None) -> int:
    total = report(venv.name, measure(venv))
    if max_mb is not None and total > max_mb:
        print(f"{venv.name}: {total:.1f} MB installed, over the {max_mb:g} MB limit",
              file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="client,server,agent,server+agent")
    parser.add_argument("--wheel", type=Path, help="install this wheel (default: build one)")
    parser.add_argument("--venv", type=Path, help="measure this virtualenv only")
    parser.add_argument("--max-mb", type=float, help="with --venv: fail above this size")
    args = parser.parse_args()
    if args.venv:
        return check(args.venv, args.max_mb)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    compare(variants, args.wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
