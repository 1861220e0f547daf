"""Which GPUs this machine has, from the best source that answers.

In order (:data:`SMI_SOURCES` after NVML), richest first:

1. NVML;
2. ``nvidia-smi -q -x``;
3. ``nvidia-smi -q``, the same report as text: every fact the probe reads from the XML (MIG
   devices, ECC, remapped rows, UUIDs, PCIe) is in it, so it stands in when the XML fails
   (refused as unsafe, not well-formed, cut short);
4. ``nvidia-smi --query-gpu=... --format=csv`` completed by the plain table (CUDA version, MIG
   devices): it has no ECC or MIG blocks of its own;
5. the plain table alone;

else no GPU. A source that is present but fails (a driver/library mismatch, a hung or lying
nvidia-smi, unsafe XML, output a parser could not read) is recorded in ``errors`` and the next
one is tried, so the report says why a richer source was not used. So is a reading that did
not read everything it shows (``SmiReading.problems``: a GPU block a parser failed on, a GPU
without name or memory, fewer GPUs than attached); when no source reads everything, the first
such reading is kept, with its problems among the errors. A missing NVML library or
nvidia-smi binary is not an error: it means no NVIDIA driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from bourse.agent.probe.commands import CommandError, run_command, which
from bourse.agent.probe.nvml import read_nvml
from bourse.agent.probe.reading import SmiOutputError, SmiReading
from bourse.agent.probe.smi_csv import QUERY_FIELDS, invalid_fields, parse_csv
from bourse.agent.probe.smi_table import parse_table
from bourse.agent.probe.smi_text import parse_text
from bourse.agent.probe.smi_xml import parse_xml

NO_GPU = SmiReading("none", None, None, ())
_NO_DEVICES = "No devices were found"


@dataclass(frozen=True, slots=True)
class GpuProbe:
    reading: SmiReading
    errors: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        """The reading kept did not read all it shows: no source did."""
        return bool(self.reading.problems)


def probe_gpus(*, nvml: Any = None, smi: str | None = None, timeout: float = 20.0) -> GpuProbe:
    """The first reading that reads everything it shows; else the first one that read
    anything, with what it could not read among the errors."""
    errors: list[str] = []
    first_partial: SmiReading | None = None
    for label, read in _sources(nvml, smi, timeout):
        found = _attempt(label, read, errors)
        if found is not None and not found.problems:
            return GpuProbe(found, tuple(errors))
        if found is not None:
            errors.extend(found.problems)
            first_partial = first_partial or found
        if any(_NO_DEVICES in e for e in errors):
            break
    return GpuProbe(first_partial or NO_GPU, tuple(errors))


Source = Callable[[], SmiReading | None]


def _sources(nvml: Any, smi: str | None, timeout: float) -> Iterator[tuple[str, Source]]:
    yield "NVML", lambda: read_nvml(nvml)
    smi = smi or which("nvidia-smi")
    if smi is not None:
        for label, read in SMI_SOURCES:
            yield label, partial(read, smi, timeout)


def _attempt(label: str, read: Source, errors: list[str]) -> SmiReading | None:
    """One source's reading, or None with the reason appended to ``errors``."""
    try:
        return read()
    except (SmiOutputError, CommandError) as exc:
        errors.append(str(exc))
    except Exception as exc:  # untrusted output: a parser's blind spot costs this source only
        errors.append(f"{label}: output this probe could not read "
                      f"({type(exc).__name__}: {str(exc)[:200]})")
    return None


def _smi(smi: str, args: Sequence[str], timeout: float) -> str:
    out = run_command([smi, *args], timeout=timeout)
    if out.returncode != 0:
        said = (out.stdout.strip() or out.stderr.strip() or "no output").splitlines()[0][:300]
        command = " ".join(["nvidia-smi", *args])
        raise SmiOutputError(f"{command} exited with {out.returncode}: {said}")
    return out.stdout


def _from_xml(smi: str, timeout: float) -> SmiReading:
    return parse_xml(_smi(smi, ["-q", "-x"], timeout))


def _from_text(smi: str, timeout: float) -> SmiReading:
    found = parse_text(_smi(smi, ["-q"], timeout))
    if not found.gpus:
        raise SmiOutputError("nvidia-smi -q: no GPU section in its report")
    return found


def _from_table(smi: str, timeout: float) -> SmiReading:
    found = parse_table(_smi(smi, [], timeout))
    if not found.gpus:
        raise SmiOutputError("nvidia-smi: no GPU rows in its table")
    return found


def _from_csv(smi: str, timeout: float) -> SmiReading:
    found = parse_csv(_query(smi, timeout))
    try:
        table: SmiReading | None = parse_table(_smi(smi, [], timeout))
    except (SmiOutputError, CommandError):
        table = None
    return merge_table(found, table)


def _query(smi: str, timeout: float) -> str:
    """``--query-gpu`` with the fields this driver knows: it names the ones it rejects, which
    are dropped before asking again."""
    fields = list(QUERY_FIELDS)
    for _ in range(len(QUERY_FIELDS)):
        args = [f"--query-gpu={','.join(fields)}", "--format=csv"]
        out = run_command([smi, *args], timeout=timeout)
        rejected = set(invalid_fields(out.stdout + out.stderr)) & set(fields)
        if not rejected:
            if out.returncode != 0:
                said = (out.stdout.strip() or out.stderr.strip() or "no output").splitlines()[0]
                raise SmiOutputError(f"nvidia-smi --query-gpu exited with {out.returncode}: "
                                     f"{said[:300]}")
            return out.stdout
        fields = [f for f in fields if f not in rejected]
    raise SmiOutputError("nvidia-smi --query-gpu rejected every field asked")


SMI_SOURCES: tuple[tuple[str, Callable[[str, float], SmiReading]], ...] = (
    ("nvidia-smi -q -x", _from_xml), ("nvidia-smi -q", _from_text),
    ("nvidia-smi --query-gpu", _from_csv), ("nvidia-smi", _from_table))


def merge_table(query: SmiReading, table: SmiReading | None) -> SmiReading:
    """The CSV reading completed by the table: its CUDA version and MIG devices, with the MIG
    mode the table shows beside them (MIG devices exist only in MIG mode)."""
    if table is None:
        return query
    migs = {g.index: g for g in table.gpus if g.mig_instances}
    gpus = tuple(g.model_copy(update={"mig_instances": t.mig_instances,
                                      "mig_enabled": t.mig_enabled or g.mig_enabled})
                 if (t := migs.get(g.index)) is not None else g for g in query.gpus)
    return replace(query, cuda=table.cuda or query.cuda, gpus=gpus)
