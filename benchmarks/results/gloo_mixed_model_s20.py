"""A model with bf16, fp32 and fp16 layers, 2 gloo ranks, 3 AdamW steps: does every parameter
equal its fp32 master cast to its dtype after the steps? Run from the repository root:

    python benchmarks/results/gloo_mixed_model_s20.py

Prints, per ``step_chunks``, the dtypes of each chunk's buckets and one flag per parameter
tensor for each rank. Log: gloo_mixed_model_s20.log (5dd16b6, before the fix, and after it).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
from distributed import run_ranks  # noqa: E402
from equivalence import full_masters  # noqa: E402

from tritonzero import ZeroOptimizer  # noqa: E402


class Mixed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(13, 57).to(torch.bfloat16)
        self.norm = torch.nn.LayerNorm(57)
        self.b = torch.nn.Linear(57, 3).half()

    def forward(self, x):
        return self.b(self.norm(self.a(x.bfloat16()).float()).half()).float()


def train(chunks: int):
    torch.manual_seed(0)
    model = Mixed()
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=1e-2), bucket_size=300, step_chunks=chunks)
    rank = torch.distributed.get_rank()
    for step in range(3):
        x = torch.randn(8, 13, generator=torch.Generator().manual_seed(100 * step + rank))
        opt.backward(model(x).square().mean())
        opt.step()
        opt.zero_grad()
    opt.finish_param_sync()
    masters = full_masters(opt)
    chunk_dtypes = [[str(b.layout.dtype).removeprefix("torch.") for b in chunk] for chunk in opt._gather.chunks]
    return chunk_dtypes, [bool(torch.equal(p.detach(), masters[id(p)].to(p.dtype))) for p in model.parameters()]


if __name__ == "__main__":
    for chunks in (1, 2):
        for rank, (dtypes, match) in enumerate(run_ranks(2, train, chunks)):
            print(f"step_chunks={chunks} rank {rank} chunks {dtypes} param == master: {match}")
