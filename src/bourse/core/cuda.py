"""CUDA, driver and PyTorch compatibility rules, from the vendors' published tables.

The tables live in ``bourse/data`` (sources in SOURCES.md): CUDA toolkit -> minimum Linux driver,
minor-version compatibility floors per CUDA family, PyTorch release -> CUDA builds, and the
oldest compute capability each CUDA family still supports.

A PyTorch wheel carries its own CUDA runtime, so for it only the node's *driver* matters. bourse
requires the driver that NVIDIA lists for the build's toolkit (full feature set). Minor-version
compatibility (any 12.x build on a >= 525.60.13 driver, with PTX JIT unavailable) is reported as
a note and honoured only when asked for, because jobs that JIT-compile kernels fail under it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from bourse.core.data import read_rows
from bourse.core.errors import InvalidInput
from bourse.core.gpus import GpuModel, catalogue
from bourse.core.versions import Version, parse_version


@dataclass(frozen=True, slots=True)
class TorchRelease:
    version: Version
    stable: tuple[Version, ...]
    experimental: tuple[Version, ...]

    @property
    def builds(self) -> tuple[Version, ...]:
        """Stable builds first, newest first, then experimental ones."""
        return (*sorted(self.stable, reverse=True), *sorted(self.experimental, reverse=True))


@dataclass(frozen=True, slots=True)
class Tables:
    min_driver: dict[Version, Version]  # CUDA major.minor -> driver of its GA release
    family_floor: dict[int, Version]  # CUDA major -> minor-version-compatibility driver floor
    arch_floor: dict[int, tuple[int, int]]  # CUDA major -> oldest compute capability
    torch: dict[Version, TorchRelease]  # torch major.minor -> its CUDA builds


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a node can run a requested environment, why, and what would work instead."""

    ok: bool
    reason: str
    build: str | None = None  # the CUDA build chosen, e.g. "cu118"
    alternative: str | None = None  # the nearest thing that would work here
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        text = ("yes: " if self.ok else "no: ") + self.reason
        if not self.ok and self.alternative:
            text += f" or {self.alternative}"
        return text


def _versions(text: str) -> tuple[Version, ...]:
    return tuple(parse_version(v) for v in text.split())


@cache
def tables() -> Tables:
    min_driver: dict[Version, Version] = {}
    for row in read_rows("cuda_driver_min.csv"):
        cuda, driver = parse_version(row["cuda_toolkit"]).major_minor(), parse_version(
            row["min_linux_driver"])
        min_driver[cuda] = min(driver, min_driver.get(cuda, driver))
    torch = {}
    for row in read_rows("torch_cuda.csv"):
        version = parse_version(row["torch"])
        torch[version] = TorchRelease(
            version, _versions(row["stable_cuda"]), _versions(row["experimental_cuda"]))
    return Tables(
        min_driver=min_driver,
        family_floor={int(r["cuda_family"]): parse_version(r["min_driver_for_minor_version_compat"])
                      for r in read_rows("cuda_minor_compat.csv")},
        arch_floor={int(r["cuda_family"]): _cc(r["min_compute_capability"])
                    for r in read_rows("cuda_arch_floor.csv")},
        torch=torch,
    )


def _cc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def min_driver(cuda: Version) -> Version:
    """The oldest Linux driver NVIDIA lists for a CUDA toolkit (major.minor)."""
    known = tables().min_driver
    key = cuda.major_minor()
    if key not in known:
        raise InvalidInput(
            f"unknown CUDA version {cuda}", field="cuda",
            hint=f"known: {', '.join(str(v) for v in sorted(known))}",
        )
    return known[key]


def max_cuda(driver: Version) -> Version | None:
    """The newest CUDA toolkit a driver supports (what nvidia-smi calls "CUDA Version")."""
    fits = [cuda for cuda, need in tables().min_driver.items() if need <= driver]
    return max(fits) if fits else None


def torch_release(text: str) -> TorchRelease:
    """The table row for ``"2.1"`` or ``"2.1.0"``; unknown releases are an input error."""
    version = parse_version(text, field="torch").major_minor()
    known = tables().torch
    if version not in known:
        raise InvalidInput(
            f"unknown torch release {text!r}", field="torch",
            hint=f"known: {', '.join(str(v) for v in sorted(known))}",
        )
    return known[version]


def parse_cuda_floor(text: str) -> Version:
    """``">=12.1"``, ``"12.1+"`` or ``"12.1"`` -> (12, 1): the oldest CUDA the job accepts."""
    raw = str(text).strip().removeprefix(">=").removesuffix("+").strip()
    if any(op in raw for op in "<>=!~"):
        raise InvalidInput(
            f"cuda={text!r}: only a floor is supported", field="cuda", hint='write cuda=">=12.1"'
        )
    version = parse_version(raw, field="cuda").major_minor()
    min_driver(version)  # validates that the toolkit exists
    return version


def arch_supports(gpu: GpuModel, cuda: Version) -> bool:
    floor = tables().arch_floor.get(cuda.major)
    if gpu.vendor != "nvidia" or gpu.compute_capability is None:
        return False
    return floor is None or gpu.compute_capability >= floor


def _driver_ok(driver: Version | None, cuda: Version, minor_compat: bool) -> bool:
    if driver is None:
        return True  # provisioned machines get a current driver
    if driver >= min_driver(cuda):
        return True
    floor = tables().family_floor.get(cuda.major)
    return minor_compat and floor is not None and driver >= floor


def _build_ok(
    driver: Version | None, gpu: GpuModel | None, cuda: Version, minor_compat: bool
) -> bool:
    return (gpu is None or arch_supports(gpu, cuda)) and _driver_ok(driver, cuda, minor_compat)


def runnable_build(
    driver: Version | None, gpu: GpuModel | None, torch: str | None, floor: Version | None,
    minor_compat: bool = False,
) -> Version | None:
    """The CUDA build a node would use for the request, or None if it cannot run it.

    The fast path behind :func:`can_run`, without the explanations: the matcher asks it for
    every (driver, GPU) pair it meets.
    """
    if gpu is not None and gpu.vendor != "nvidia":
        return None
    if torch is None:
        assert floor is not None
        return floor if _build_ok(driver, gpu, floor, minor_compat) else None
    builds = [b for b in torch_release(torch).builds if floor is None or b >= floor]
    return next((b for b in builds if _build_ok(driver, gpu, b, minor_compat)), None)


def can_run(
    driver: str | Version | None,
    gpu: GpuModel | str | None,
    *,
    torch: str | None = None,
    cuda: str | Version | None = None,
    minor_compat: bool = False,
) -> Verdict:
    """Can a node with this driver and GPU run a torch release and/or a CUDA floor?

    ``driver`` None means "installed at provisioning" (catalogue offers): only the GPU
    architecture can rule a build out. Returns a :class:`Verdict` with the reason and, when the
    answer is no, the nearest thing that would work.
    """
    drv = parse_version(driver, field="driver") if isinstance(driver, str) else driver
    model = catalogue().get(gpu) if isinstance(gpu, str) else gpu
    floor = parse_cuda_floor(cuda) if isinstance(cuda, str) else cuda
    if model is not None and model.vendor != "nvidia":
        return Verdict(False, f"{model.id} is an {model.vendor.upper()} GPU: no CUDA")
    if torch is None and floor is None:
        return Verdict(True, "no CUDA requirement")
    if torch is None:
        assert floor is not None
        return _cuda_verdict(drv, model, floor, minor_compat)
    return _torch_verdict(drv, model, torch, floor, minor_compat)


def _cuda_verdict(
    driver: Version | None, gpu: GpuModel | None, floor: Version, minor_compat: bool
) -> Verdict:
    tag, need = floor.cuda_tag(), min_driver(floor)
    if gpu is not None and not arch_supports(gpu, floor):
        return Verdict(False, _arch_reason(gpu, floor))
    if _driver_ok(driver, floor, minor_compat):
        return Verdict(True, f"CUDA {floor} needs driver >= {need}", tag)
    assert driver is not None
    newest = max_cuda(driver)
    has = f"CUDA {newest}" if newest else "older than CUDA 11.0"
    return Verdict(
        False, f"CUDA >= {floor} needs driver >= {need}; "
        f"driver {driver} supports {has}",
        notes=_minor_compat_notes(driver, floor),
    )


def _torch_verdict(
    driver: Version | None, gpu: GpuModel | None, torch: str,
    floor: Version | None, minor_compat: bool,
) -> Verdict:
    release, name = torch_release(torch), f"torch {torch}"
    builds = [b for b in release.builds if floor is None or b >= floor]
    if not builds:
        have = ", ".join(b.cuda_tag() for b in release.builds)
        return Verdict(False, f"{name} has no build for CUDA >= {floor} "
                              f"(it has {have})")
    build = runnable_build(driver, gpu, torch, floor, minor_compat)
    if build is not None:
        return Verdict(True, f"{name} ({build.cuda_tag()}) {_driver_rule(driver, build)}",
                       build.cuda_tag())
    return Verdict(False, _torch_reason(name, driver, gpu, builds),
                   alternative=_older_torch(driver, gpu, floor, minor_compat),
                   notes=_minor_compat_notes(driver, min(builds)) if driver else ())


def _driver_rule(driver: Version | None, build: Version) -> str:
    if driver is None or driver >= min_driver(build):
        return f"needs driver >= {min_driver(build)}"
    floor = tables().family_floor[build.major]
    return (f"runs under CUDA {build.major}.x minor-version compatibility "
            f"(driver >= {floor}; no PTX JIT)")


def _torch_reason(
    name: str, driver: Version | None, gpu: GpuModel | None, builds: list[Version]
) -> str:
    runnable = [b for b in builds if gpu is None or arch_supports(gpu, b)]
    if not runnable:
        assert gpu is not None
        return f"{name}: " + _arch_reason(gpu, min(builds))
    easiest = min(runnable, key=min_driver)
    need = f"needs driver >= {min_driver(easiest)} ({easiest.cuda_tag()})"
    return f"driver {driver} is too old for {name}: {need}" if driver else f"{name} {need}"


def _older_torch(
    driver: Version | None, gpu: GpuModel | None, floor: Version | None, minor_compat: bool
) -> str | None:
    for version in sorted(tables().torch, reverse=True):
        release = tables().torch[version]
        for build in release.builds:
            if (floor is None or build >= floor) and _build_ok(driver, gpu, build, minor_compat):
                return f"torch <= {version} ({build.cuda_tag()})"
    return None


def _arch_reason(gpu: GpuModel, cuda: Version) -> str:
    cc = ".".join(str(p) for p in gpu.compute_capability or ())
    floor = ".".join(str(p) for p in tables().arch_floor[cuda.major])
    return (f"{gpu.id} ({gpu.architecture}, compute capability {cc}) is not supported by "
            f"CUDA {cuda.major} builds (they need compute capability >= {floor})")


def _minor_compat_notes(driver: Version, cuda: Version) -> tuple[str, ...]:
    floor = tables().family_floor.get(cuda.major)
    if floor is None or driver < floor:
        return ()
    return (f"driver {driver} is within CUDA {cuda.major}.x minor-version "
            f"compatibility (>= {floor}): {cuda.cuda_tag()} may run with a "
            "limited feature set (no PTX JIT); bourse does not place on it unless asked",)


PYTORCH_INDEX = "https://download.pytorch.org/whl"


def torch_wheel_index(driver: str | Version | None, gpu: GpuModel | str | None,
                      torch: str | None = None, base: str = PYTORCH_INDEX) -> str:
    """The PyTorch package index a node should install torch from: the CUDA build its driver
    and GPU run (the newest one that fits, for ``torch`` if given), or the CPU build.
    ``base``: where PyTorch's indexes are (a mirror of download.pytorch.org/whl)."""
    base = base.rstrip("/")
    if driver is None or gpu is None:
        return f"{base}/cpu"
    drv = parse_version(driver, field="driver") if isinstance(driver, str) else driver
    model = catalogue().get(gpu) if isinstance(gpu, str) else gpu
    releases = [torch] if torch else [str(v) for v in sorted(tables().torch, reverse=True)]
    for release in releases:
        build = runnable_build(drv, model, release, None)
        if build is not None:
            return f"{base}/{build.cuda_tag()}"
    return f"{base}/cpu"
