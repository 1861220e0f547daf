"""A plain-PyTorch DDP script for the nodes of a gang, one CPU process each, launched as

    torchrun --nnodes $NNODES --node-rank $NODE_RANK --nproc-per-node 1 \
        --master-addr $MASTER_ADDR --master-port $MASTER_PORT torchrun_ddp.py [FOLDER]

torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for it; gloo reads
GLOO_SOCKET_IFNAME. Each rank trains on its own shard of the data, so the ranks end with the same
parameters only if DDP really averaged their gradients. At the end every rank prints

    CHECKSUM rank=<global rank> world=<world size> <sha256 of its parameters>

and, given a folder as its first argument, writes that line to <folder>/checksum-<rank>.txt.
A second argument sets the number of steps (60 by default: a second or two; more leaves time to
cut a link in the middle of training).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

STEPS = 60
SAMPLES, BATCH = 512, 16


def dataset() -> TensorDataset:
    x = torch.randn(SAMPLES, 8, generator=torch.Generator().manual_seed(1))
    return TensorDataset(x, torch.sin(x).sum(dim=1, keepdim=True))


def checksum(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def train(model: nn.Module, steps: int) -> None:
    data = dataset()
    sampler = DistributedSampler(data, seed=0)  # this rank's shard, reshuffled each epoch
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            step += 1
            if step == steps:
                return
        epoch += 1


def main() -> None:
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    train(DistributedDataParallel(model), int(sys.argv[2]) if len(sys.argv) > 2 else STEPS)
    rank, world = dist.get_rank(), dist.get_world_size()
    line = f"CHECKSUM rank={rank} world={world} {checksum(model)}"
    print(line, flush=True)
    if len(sys.argv) > 1:
        Path(sys.argv[1], f"checksum-{rank}.txt").write_text(line + "\n")
    dist.barrier()  # no rank tears its connections down while another still uses them
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
