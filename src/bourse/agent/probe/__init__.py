"""What this machine is: GPUs (NVML, else nvidia-smi), host facts, a hardware fingerprint, and
the local checks (storage, compute) that verification judges.

``probe`` is what the agent's hello carries; ``run_probe`` is ``bourse agent probe``. The
nvidia-smi parsers are pure functions from text to a :class:`SmiReading`.
"""

from bourse.agent.probe.gpus import GpuProbe, probe_gpus
from bourse.agent.probe.reading import SmiOutputError, SmiReading
from bourse.agent.probe.report import ProbeOptions, probe, run_probe
from bourse.agent.probe.smi_csv import parse_csv, parse_query_gpu
from bourse.agent.probe.smi_table import parse_table
from bourse.agent.probe.smi_text import parse_text
from bourse.agent.probe.smi_xml import parse_xml

__all__ = [
    "GpuProbe", "ProbeOptions", "SmiOutputError", "SmiReading", "parse_csv", "parse_query_gpu",
    "parse_table", "parse_text", "parse_xml", "probe", "probe_gpus", "run_probe",
]
