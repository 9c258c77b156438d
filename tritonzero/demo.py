"""Train a small model with ZeroOptimizer on several processes and check it against one process.

    python -m tritonzero.demo                 # 2 CPU processes over gloo (Triton interpreter)
    python -m tritonzero.demo --steps 50      # on a GPU machine: one process per visible GPU, NCCL
    torchrun --nproc_per_node 2 -m tritonzero.demo   # or let torchrun start the processes

Each rank trains on its slice of every global batch; at the end rank 0 trains the same initial
model on whole batches in one process with the same torch optimizer and compares the weights.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tritonzero import ZeroOptimizer


def _model(width: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(32, width), torch.nn.GELU(), torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, 8)
    )


def _batches(steps: int, batch: int, device: torch.device):
    """A fixed random teacher network's outputs: a task the student can learn."""
    gen = torch.Generator().manual_seed(0)
    teacher = torch.randn(32, 8, generator=gen) / 32**0.5
    for _ in range(steps):
        x = torch.randn(batch, 32, generator=gen)
        yield x.to(device), torch.sin(x @ teacher).to(device)


def _progress(step: int, steps: int, loss: float, started: float) -> None:
    done = int(30 * step / steps)
    rate = step / max(time.perf_counter() - started, 1e-9)
    print(f"step {step:4d}/{steps} [{'#' * done}{'.' * (30 - done)}] loss {loss:.5f}  {rate:5.1f} step/s", flush=True)


def train(args: argparse.Namespace) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    model = _model(args.width).to(device)
    reference = copy.deepcopy(model) if rank == 0 else None
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=args.lr), bucket_size=args.bucket_size)
    local = args.batch // world
    if rank == 0:
        print(f"{world} ranks ({dist.get_backend()}, {device.type}), {len(opt.buckets)} buckets, "
              f"{sum(p.numel() for p in model.parameters()):,} parameters")
    started = time.perf_counter()
    for step, (x, y) in enumerate(_batches(args.steps, args.batch, device), 1):
        xs, ys = x[rank * local : (rank + 1) * local], y[rank * local : (rank + 1) * local]
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        opt.backward(loss)
        opt.step()
        opt.zero_grad()
        dist.all_reduce(loss.detach(), op=dist.ReduceOp.SUM)
        if rank == 0:
            _progress(step, args.steps, loss.item() / world, started)

    if rank == 0:
        ref_opt = torch.optim.AdamW(reference.parameters(), lr=args.lr)
        for x, y in _batches(args.steps, args.batch, device):
            torch.nn.functional.mse_loss(reference(x), y).backward()
            ref_opt.step()
            ref_opt.zero_grad()
        diff = max((p - q).abs().max().item() for p, q in zip(model.parameters(), reference.parameters()))
        scale = max(q.abs().max().item() for q in reference.parameters())
        verdict = "OK" if diff <= 1e-4 * scale else "MISMATCH"
        print(f"final parameters vs one-process reference: max |diff| {diff:.2e} (max |w| {scale:.2f}): {verdict}")
        if verdict != "OK":
            sys.exit(1)


def _worker(rank: int, world: int, init_method: str, args: argparse.Namespace) -> None:
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    try:
        train(args)
    finally:
        dist.barrier()
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64, help="global batch, split across ranks")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--bucket-size", type=int, default=20_000, help="elements per gradient bucket")
    parser.add_argument("--nproc", type=int, default=None, help="processes (default: GPUs, or 2 on CPU)")
    args = parser.parse_args(argv)
    for var in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        os.environ.setdefault(var, "0" if var == "NCCL_NVLS_ENABLE" else "1")
    if "RANK" in os.environ:  # started by torchrun
        _worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://", args)
        return
    world = args.nproc or (torch.cuda.device_count() if torch.cuda.is_available() else 2)
    if args.batch % world:
        parser.error(f"--batch {args.batch} must divide evenly over {world} processes")
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_worker, args=(world, f"file://{tmp}/store", args), nprocs=world, start_method="spawn")


if __name__ == "__main__":
    main()
