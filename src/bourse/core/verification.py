"""Verification: what the coordinator concludes from an agent's probe report.

A pure function of the report (and of what the provider declared): each check is pass, warn or
fail with a reason the provider can act on. The agent only measures; the thresholds live here,
each with its reason:

* GPU memory must match the catalogue model within its tolerance (±7.5 %, ``gpus.py``).
* Uncorrectable ECC errors (volatile or aggregate), a row-remapping failure, or 60+ retired
  pages (NVIDIA's replacement guidance for page retirement) fail; pending remaps or retirements
  warn (a GPU reset applies them).
* A PCIe link below its maximum generation or width warns: an idle GPU may drop its link
  generation to save power, so the reason says to re-run under load before touching hardware.
* A torch matmul below :data:`PERF_FLOOR` (50 %) of the model's dense FP16/BF16 peak fails. A
  large square matmul on a healthy GPU reaches 60-80 % of that peak (cuBLAS on A100, H100,
  L40S, RTX 4090); half the peak leaves room for clock and power variance in a short run, yet
  a GPU held at half speed (power brake, thermal slowdown, a power cap) or one claiming a
  faster model than it is (an L4 sold as an L40S measures ~121 of 362) lands below it.
* Storage slower than :data:`STORAGE_FLOOR_MB_S` (100 MB/s) warns: that is below a single
  hard disk or a baseline cloud volume (EBS gp3: 125 MB/s), at which staging a 10 GB data set
  or checkpoint takes over 100 s. A storage error fails.
* What a provider declared and the probe does not confirm fails, naming what was measured.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache

from bourse.core.cuda import arch_supports, max_cuda, min_driver, runnable_build, tables
from bourse.core.data import read_rows
from bourse.core.devices import mig_address
from bourse.core.errors import InvalidInput
from bourse.core.gpus import GpuModel, catalogue
from bourse.core.hardware import (
    Benchmark,
    Check,
    CheckStatus,
    Declared,
    GpuInfo,
    MigInstance,
    ProbeReport,
    StorageResult,
    TorchInfo,
    VerificationReport,
)
from bourse.core.versions import Version, parse_version

PERF_FLOOR = 0.5
STORAGE_FLOOR_MB_S = 100.0
POWER_FLOOR = 0.8  # a power limit below 80 % of the board's default caps its clocks
RETIRED_PAGES_LIMIT = 60
DECLARED_MEMORY_MARGIN = 0.05  # the kernel reports a few percent less than the DIMMs hold
SLOWDOWNS = frozenset({"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                       "sw_thermal_slowdown"})
_RANK: dict[CheckStatus, int] = {"pass": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True, slots=True)
class Peak:
    """Dense datasheet TFLOPS of a model (``bourse/data/gpu_perf.csv``)."""

    fp32: float | None
    fp16: float | None
    bf16: float | None
    basis: str

    def for_dtype(self, dtype: str) -> float | None:
        return {"float32": self.fp32, "float16": self.fp16, "bfloat16": self.bf16}.get(dtype)


def _tflops(text: str) -> float | None:
    return float(text) if text.strip() else None


@cache
def peaks() -> dict[str, Peak]:
    return {r["model"]: Peak(_tflops(r["fp32_tflops"]), _tflops(r["fp16_tflops"]),
                             _tflops(r["bf16_tflops"]), r["basis"])
            for r in read_rows("gpu_perf.csv")}


def verify(report: ProbeReport, declared: Declared | None = None) -> VerificationReport:
    """Judge a probe report. ``declared`` (what the provider claims) is checked against it;
    an unknown GPU label there raises :class:`InvalidInput`."""
    checks = [*_host_checks(report), *_driver_checks(report.driver), *_source_checks(report),
              *(c for g in report.gpus for c in gpu_checks(g, report)),
              *_storage_checks(report.storage), *_cpu_checks(report.benchmarks),
              *declared_checks(report, declared)]
    return VerificationReport(
        status=worst(c.status for c in checks), checks=checks,
        notes=compatibility_notes(report.driver, report.gpus), offers=offers(report.gpus),
        fingerprint=report.fingerprint)


def worst(statuses: Iterable[CheckStatus]) -> CheckStatus:
    return max(statuses, key=_RANK.__getitem__, default="pass")


# --- driver --------------------------------------------------------------------------------

def _driver(text: str | None) -> Version | None:
    try:
        return parse_version(text, field="driver") if text else None
    except InvalidInput:
        return None


def _families(driver: Version) -> list[str]:
    return [f"{family}.x" for family, floor in sorted(tables().family_floor.items())
            if driver >= floor]


def _newest_torch_need() -> tuple[Version, Version, Version]:
    """The newest torch release in the table, its least demanding build and that build's
    driver."""
    newest = max(tables().torch)
    build = min(tables().torch[newest].builds, key=min_driver)
    return newest, build, min_driver(build)


def _driver_checks(text: str | None) -> list[Check]:
    driver = _driver(text)
    if text is None:
        return []
    if driver is None:
        return [Check(name="driver", status="warn", measured=text,
                      reason=f"cannot read driver version {text!r}")]
    newest_cuda = max_cuda(driver)
    torch, build, need = _newest_torch_need()
    if newest_cuda is None:
        oldest = min(tables().min_driver.values())
        return [Check(name="driver", status="fail", measured=str(driver), expected=f">= {need}",
                      reason=f"driver {driver} predates CUDA 11.0 (which needs >= {oldest}): "
                             f"no PyTorch build bourse knows runs on it; install a driver "
                             f">= {need} (torch {torch}, {build.cuda_tag()})")]
    families = " and ".join(_families(driver)) or "no"
    supports = f"driver {driver} supports CUDA {newest_cuda} (runs CUDA {families} builds)"
    if driver < need:
        return [Check(name="driver", status="warn", measured=str(driver), expected=f">= {need}",
                      reason=f"{supports}; torch {torch} needs driver >= {need} "
                             f"({build.cuda_tag()}): upgrade the driver to run current builds")]
    return [Check(name="driver", status="pass", measured=str(driver), reason=supports)]


def compatibility_notes(driver_text: str | None, gpus: Iterable[GpuInfo]) -> list[str]:
    """"driver 515.65.01: runs torch <= 2.0 (cu117); torch 2.1 (cu118) needs driver >=
    520.61.05" — from the CUDA tables, for the node's oldest GPU architecture."""
    driver = _driver(driver_text)
    if driver is None:
        return []
    gpu = _oldest_gpu(gpus)
    releases = sorted(tables().torch, reverse=True)
    runs = next(((r, b) for r in releases
                 if (b := runnable_build(driver, gpu, str(r), None)) is not None), None)
    if runs is None:
        return [f"driver {driver}: runs no PyTorch release bourse knows "
                f"(oldest: torch {releases[-1]})"]
    release, build = runs
    newer = [r for r in releases if r > release]
    head = f"driver {driver}: runs torch <= {release} ({build.cuda_tag()})"
    if not newer:
        return [f"{head}, the newest release bourse knows"]
    return [f"{head}; {_needs(min(newer), gpu)}"]


def _oldest_gpu(gpus: Iterable[GpuInfo]) -> GpuModel | None:
    models = [catalogue().get(g.model) for g in gpus if g.model]
    known = [m for m in models if m.compute_capability]
    return min(known, key=lambda m: m.compute_capability or (0, 0)) if known else None


def _needs(release: Version, gpu: GpuModel | None) -> str:
    builds = [b for b in tables().torch[release].builds if gpu is None or arch_supports(gpu, b)]
    if not builds:
        return f"torch {release} has no build for {gpu.id if gpu else 'this GPU'}"
    easiest = min(builds, key=min_driver)
    return f"torch {release} ({easiest.cuda_tag()}) needs driver >= {min_driver(easiest)}"


# --- GPUs ----------------------------------------------------------------------------------

def _host_checks(report: ProbeReport) -> list[Check]:
    """A report that measured no CPU, memory or fingerprint is not a measurement."""
    host = report.host
    if host.cpu_logical_cores <= 0 or host.memory_mib <= 0 or not report.fingerprint:
        return [Check(name="host", status="fail",
                      reason="the report measured no CPUs, no memory or no fingerprint; "
                             "run `bourse agent probe` on the node to see why")]
    return []


def _source_checks(report: ProbeReport) -> list[Check]:
    """Why the GPU facts come from where they do. The probe keeps the first source that reads
    all it shows; when none does, the first that read anything (``gpu_partial``)."""
    if not report.gpu_errors:
        return []
    errors = "; ".join(report.gpu_errors)
    if report.gpus and report.gpu_partial:
        reason = (f"GPU facts come from {report.source}, which did not read everything it "
                  f"shows; no source did, so its partial reading is kept: {errors}")
    elif report.gpus:
        reason = (f"GPU facts come from {report.source} because richer sources failed or did "
                  f"not read everything they show: {errors}")
    else:
        reason = (f"an NVIDIA driver tool is installed but no GPU could be read: {errors}; the "
                  "node is listed without GPUs until this is fixed")
    return [Check(name="gpu.source", status="warn", reason=reason)]


def gpu_checks(g: GpuInfo, report: ProbeReport) -> list[Check]:
    prefix = f"gpu{g.index if g.index is not None else ''}"
    found = [_identity(g), _memory(g), _pcie(g), _ecc(g), _memory_health(g), _power(g),
             _clocks(g), _mig(g), _compute(g, report)]
    return [c.model_copy(update={"name": f"{prefix}.{c.name}"}) for c in found if c]


def _identity(g: GpuInfo) -> Check | None:
    if g.model:
        return None
    return Check(name="model", status="warn", measured=g.name,
                 reason=f"{g.name!r} is not in bourse's GPU catalogue: it is offered under its "
                        "raw name and its memory and speed cannot be checked; ask for it to be "
                        "added to bourse/data/gpus.csv")


def _memory(g: GpuInfo) -> Check | None:
    if g.model is None or g.memory_mib is None:
        return None
    model = catalogue().get(g.model)
    measured, expected = f"{g.memory_mib} MiB", f"{model.memory_mib} MiB ±7.5%"
    if model.memory_matches(g.memory_mib):
        return Check(name="memory", status="pass", measured=measured, expected=expected,
                     reason=f"{g.memory_mib} MiB matches {model.id} ({expected})")
    return Check(name="memory", status="fail", measured=measured, expected=expected,
                 reason=f"{g.name} reports {g.memory_mib} MiB but a {model.id} has "
                        f"{model.memory_mib} MiB: a mislabelled board, a vGPU slice or a "
                        "failing memory; offer it under what it is")


def _pcie(g: GpuInfo) -> Check | None:
    gen, gen_max, width, width_max = (g.pcie_gen_current, g.pcie_gen_max,
                                      g.pcie_width_current, g.pcie_width_max)
    if gen is None or gen_max is None or width is None or width_max is None:
        return None
    measured, expected = f"gen {gen} x{width}", f"gen {gen_max} x{width_max}"
    if gen >= gen_max and width >= width_max:
        return Check(name="pcie", status="pass", measured=measured, reason=f"PCIe {measured}")
    reason = f"PCIe link runs at {measured}, below its maximum {expected}"
    if width < width_max:
        reason += "; narrow link: check the slot, riser and BIOS lane settings"
    if gen < gen_max:
        reason += ("; an idle GPU drops its link generation to save power, so re-run "
                   "`bourse agent probe` while the GPU is busy before reseating anything")
    return Check(name="pcie", status="warn", measured=measured, expected=expected, reason=reason)


def _ecc(g: GpuInfo) -> Check | None:
    volatile, aggregate = g.ecc_uncorrectable_volatile, g.ecc_uncorrectable_aggregate
    if volatile is None and aggregate is None:
        return None
    measured = f"volatile {volatile}, aggregate {aggregate}"
    if volatile or aggregate:
        return Check(name="ecc", status="fail", measured=measured, expected="0",
                     reason=f"uncorrectable ECC errors ({measured}): data on this GPU may be "
                            "corrupt; reset it (nvidia-smi -r) or reboot, and replace it if "
                            "they come back")
    mode = {True: "enabled", False: "disabled", None: "unknown"}[g.ecc_enabled]
    return Check(name="ecc", status="pass", measured=measured,
                 reason=f"no uncorrectable ECC errors (ECC {mode})")


def _memory_health(g: GpuInfo) -> Check | None:
    if g.remapped_rows_failure:
        return Check(name="memory_health", status="fail", measured="row remapping failed",
                     reason="row remapping failed: the GPU has no spare memory rows left; it "
                            "needs replacing")
    if g.retired_pages is not None and g.retired_pages >= RETIRED_PAGES_LIMIT:
        return Check(name="memory_health", status="fail", measured=f"{g.retired_pages} pages",
                     expected=f"< {RETIRED_PAGES_LIMIT}",
                     reason=f"{g.retired_pages} retired memory pages, past the "
                            f"{RETIRED_PAGES_LIMIT} at which NVIDIA advises replacement")
    if g.remapped_rows_pending or g.retired_pages_pending:
        what = "row remapping" if g.remapped_rows_pending else "page retirement"
        return Check(name="memory_health", status="warn", measured=f"{what} pending",
                     reason=f"{what} pending after a memory error: reset the GPU "
                            "(nvidia-smi -r) or reboot to apply it")
    known = (g.remapped_rows_failure, g.retired_pages, g.remapped_rows_pending,
             g.retired_pages_pending)
    if all(v is None for v in known):
        return None
    return Check(name="memory_health", status="pass", reason="no pending or failed remapping")


def _power(g: GpuInfo) -> Check | None:
    limit, default = g.power_limit_w, g.power_default_limit_w
    if limit is None or not default or limit >= default * POWER_FLOOR:
        return None
    return Check(name="power", status="warn", measured=f"{limit:g} W", expected=f"{default:g} W",
                 reason=f"power limit {limit:g} W is {limit / default:.0%} of the board's "
                        f"default {default:g} W, which caps its speed; raise it with "
                        f"nvidia-smi -pl {default:g} or offer it as the slower GPU it is")


def _clocks(g: GpuInfo) -> Check | None:
    slow = sorted(SLOWDOWNS & set(g.clock_event_reasons))
    if not slow:
        return None
    return Check(name="clocks", status="warn", measured=", ".join(slow),
                 reason=f"clocks held down by {', '.join(slow)}: check cooling, airflow and "
                        "power delivery")


def _mig(g: GpuInfo) -> Check | None:
    if not g.mig_enabled and not g.mig_pending:
        return None
    if g.mig_pending is not None and g.mig_pending != g.mig_enabled:
        return Check(name="mig", status="warn", reason="a MIG mode change is pending: reset the "
                                                       "GPU (nvidia-smi -r) to apply it")
    if not g.mig_instances:
        return Check(name="mig", status="warn",
                     reason="MIG is enabled but no MIG instance exists, so nothing can run: "
                            "create instances (nvidia-smi mig -cgi ... -C) or disable MIG")
    unnamed = sum(1 for m in g.mig_instances if mig_address(g, m) is None)
    if unnamed:
        return Check(name="mig", status="warn", measured=f"{len(g.mig_instances)} instances",
                     reason=f"{unnamed} MIG devices have no UUID, nor has their GPU, so no job "
                            "can be given them: install the NVIDIA driver's NVML library "
                            "(libnvidia-ml) or an nvidia-smi that reports UUIDs")
    return Check(name="mig", status="pass", measured=f"{len(g.mig_instances)} instances",
                 reason=f"MIG enabled: {len(g.mig_instances)} instances, each offered as a "
                        "GPU of its own (the whole GPU is not offered while MIG is on)")


# --- compute -------------------------------------------------------------------------------

def _compute(g: GpuInfo, report: ProbeReport) -> Check | None:
    if g.mig_enabled or not report.benchmarks:
        return None  # a MIG GPU runs as slices; no benchmarks means the checks were skipped
    bench = next((b for b in report.benchmarks if b.device == f"cuda:{g.index}"), None)
    if bench is None:
        bench = next((b for b in report.benchmarks if b.device == "cuda" and b.error), None)
    if bench is None:
        return Check(name="compute", status="warn",
                     reason=f"not measured: {_why_no_cuda(report.host.torch)}")
    if bench.error or bench.tflops is None:
        return Check(name="compute", status="fail", measured=bench.error,
                     reason=f"the torch matmul benchmark failed on this GPU: {bench.error}")
    return _judge(g, bench)


def _why_no_cuda(torch: TorchInfo | None) -> str:
    if torch is None:
        return "torch is not installed in the node's Python; install it to measure the GPU"
    if torch.cuda is None:
        return f"the node's torch {torch.version} is a CPU build; install a CUDA build"
    return (f"torch {torch.version} (CUDA {torch.cuda}) sees no GPU: check that the driver "
            "supports that CUDA version")


def _judge(g: GpuInfo, bench: Benchmark) -> Check:
    assert bench.tflops is not None
    measured = f"{bench.tflops:.1f} TFLOPS {bench.dtype}"
    peak = peaks().get(g.model or "")
    reference = peak.for_dtype(bench.dtype) if peak else None
    if reference is None:
        return Check(name="compute", status="pass", measured=measured,
                     reason=f"{measured}; no datasheet figure for {g.model or g.name} "
                            f"{bench.dtype}: recorded, not judged")
    ratio, floor = bench.tflops / reference, reference * PERF_FLOOR
    expected = f">= {floor:.0f} TFLOPS ({PERF_FLOOR:.0%} of {reference:g} dense peak)"
    if ratio >= PERF_FLOOR:
        return Check(name="compute", status="pass", measured=measured, expected=expected,
                     reason=f"{measured}, {ratio:.0%} of a {g.model}'s dense peak")
    slow = ", ".join(sorted(SLOWDOWNS & set(g.clock_event_reasons))) or "power or thermals"
    return Check(name="compute", status="fail", measured=measured, expected=expected,
                 reason=f"{measured} is {ratio:.0%} of a {g.model}'s {reference:g} dense peak: "
                        f"the GPU is throttled ({slow}) or is not a {g.model}")


def _storage_checks(storage: StorageResult | None) -> list[Check]:
    if storage is None:
        return []
    if storage.error:
        return [Check(name="storage", status="fail", measured=storage.error,
                      reason=storage.error)]
    write, read = storage.write_mb_s or 0.0, storage.read_mb_s or 0.0
    measured = f"write {write:g} MB/s, read {read:g} MB/s"
    if min(write, read) < STORAGE_FLOOR_MB_S:
        return [Check(name="storage", status="warn", measured=measured,
                      expected=f">= {STORAGE_FLOOR_MB_S:g} MB/s",
                      reason=f"{storage.path}: {measured}, below {STORAGE_FLOOR_MB_S:g} MB/s: "
                             "staging data and checkpoints will be slow; put the work dir on "
                             "a local SSD")]
    return [Check(name="storage", status="pass", measured=measured,
                  reason=f"{measured} ({storage.size_mb} MB in {storage.path})")]


def _cpu_checks(benchmarks: list[Benchmark]) -> list[Check]:
    return [Check(name="cpu.compute", status="warn" if b.error else "pass",
                  measured=b.error or f"{(b.tflops or 0) * 1000:.1f} GFLOP/s {b.dtype}",
                  reason=b.error or f"{b.library} matmul: {(b.tflops or 0) * 1000:.1f} GFLOP/s "
                                    f"{b.dtype} (recorded, not judged)")
            for b in benchmarks if b.device == "cpu"]


# --- declared vs measured ------------------------------------------------------------------

def summary(gpus: Iterable[GpuInfo]) -> str:
    """``2x a10g + 1x t4``, or ``none``."""
    counts = Counter(g.model or g.name for g in gpus)
    return " + ".join(f"{n}x {m}" for m, n in sorted(counts.items())) or "none"


def declared_checks(report: ProbeReport, declared: Declared | None) -> list[Check]:
    if declared is None:
        return []
    return [c for c in (_declared_gpus(declared.gpus, report.gpus),
                        *_declared_host(declared, report)) if c]


def _declared_gpus(label: str | None, gpus: list[GpuInfo]) -> Check | None:
    if not label:
        return None
    selection = catalogue().resolve(label)
    count = selection.count or 1
    matching = sum(1 for g in gpus if g.model in selection.ids)
    claim, found = f"{count}x {selection.describe()}", summary(gpus)
    if matching >= count:
        return Check(name="declared.gpus", status="pass", measured=found, expected=claim,
                     reason=f"declared {claim}: found {found}")
    return Check(name="declared.gpus", status="fail", measured=found, expected=claim,
                 reason=f"declared {claim}, found {found}: the node is listed with what was "
                        "measured; correct the declaration or the hardware")


def _declared_host(declared: Declared, report: ProbeReport) -> Iterator[Check]:
    host = report.host
    memory_gib = host.memory_mib / 1024
    yield from _claim("cpus", declared.cpus, host.cpu_logical_cores, "CPUs", 0.0)
    yield from _claim("memory", declared.memory_gib, memory_gib, "GiB memory",
                      DECLARED_MEMORY_MARGIN)
    yield from _claim("disk", declared.disk_gib, host.disk_free_gib, "GiB free disk", 0.0)


def _claim(name: str, claim: float | None, found: float, unit: str,
           margin: float) -> Iterator[Check]:
    if claim is None:
        return
    text = f"declared {claim:g} {unit}, found {found:.4g}"
    ok = found >= claim * (1 - margin)
    yield Check(name=f"declared.{name}", status="pass" if ok else "fail",
                measured=f"{found:.4g}", expected=f"{claim:g}",
                reason=text if ok else f"{text}: declare what the node has")


def offers(gpus: Iterable[GpuInfo]) -> list[str]:
    """What can be offered: each GPU, or each MIG instance of a MIG-enabled GPU."""
    found = []
    for g in gpus:
        if g.mig_enabled and g.mig_instances:
            found += [_slice(g, m) for m in g.mig_instances]
        else:
            found.append(f"gpu{g.index}: {g.model or g.name}, {g.memory_mib} MiB")
    return found


def _slice(g: GpuInfo, m: MigInstance) -> str:
    name = m.profile or f"GI {m.gpu_instance_id} CI {m.compute_instance_id}"
    return (f"gpu{g.index} MIG {name} of {g.model or g.name}: {m.memory_mib} MiB, "
            f"{m.multiprocessors} SMs")
