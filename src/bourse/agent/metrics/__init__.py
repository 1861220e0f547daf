"""What the agent measures of its running jobs and of the node, every few seconds: process
trees (`processes`), GPUs through NVML (`gpus`), and the message built from both (`sampler`)."""

from bourse.agent.metrics.gpus import GpuMeter, GpuReading, NoGpus, NvmlGpus, open_gpu_meter
from bourse.agent.metrics.sampler import LiveAttempt, Sampler

__all__ = ["GpuMeter", "GpuReading", "LiveAttempt", "NoGpus", "NvmlGpus", "Sampler",
           "open_gpu_meter"]
