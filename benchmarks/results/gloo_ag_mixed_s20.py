"""gloo's coalesced all-gather on tensors of different dtypes (torch and gloo alone), 2 ranks.

    python benchmarks/results/gloo_ag_mixed_s20.py

Each rank's shard of each 10-element buffer holds 0..4 + 10 x rank; every buffer should read
0 1 2 3 4 10 11 12 13 14 after the call. Log: gloo_ag_mixed_s20.log.
"""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CASES = [(torch.float16, torch.bfloat16), (torch.float32, torch.float16), (torch.float16, torch.float32), (torch.float16, torch.float16)]


def _rank(rank: int, world: int, store: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    for dtypes in CASES:
        buffers = [torch.full((world * 5,), float("nan"), dtype=d) for d in dtypes]
        shards = [b[rank * 5 : (rank + 1) * 5] for b in buffers]
        for s in shards:
            s.copy_(torch.arange(5) + 10 * rank)
        dist.group.WORLD.allgather_into_tensor_coalesced(buffers, shards).wait()
        if rank == 0:
            print([str(d).removeprefix("torch.") for d in dtypes], [b.tolist() for b in buffers], flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank, args=(2, f"{tmp}/store"), nprocs=2)
