"""The step's two passes after the reduce-scatters: fp32 master gradients from the reduced shards
(one prep-kernel pass per 16-bit dtype) and the step in chunks, each chunk's all-gather beside
the next chunk's step."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from conftest import cpu_only
from distributed import run_ranks
from tritonzero import ZeroOptimizer
from tritonzero.bucket import Bucket
from tritonzero.layout import plan_buckets
from tritonzero.master_grads import MasterGrads
from tritonzero.param_gather import split_chunks

pytestmark = cpu_only

# Relative error against fp64 of x / scale written as fp32 (x exact in its dtype): fp32 rounding.
TOLERANCE = {torch.float16: 1e-6, torch.bfloat16: 1e-6, torch.float32: 1e-6}


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9])
def test_split_chunks_keeps_order_and_balances(n):
    rng = random.Random(n)
    sizes = [rng.choice([64, 640, 6400, 64000]) for _ in range(rng.randint(1, 23))]
    buckets = [SimpleNamespace(layout=SimpleNamespace(shard_numel=s)) for s in sizes]
    chunks = split_chunks(buckets, n)
    assert [b for c in chunks for b in c] == buckets
    assert 1 <= len(chunks) <= min(n, len(buckets)) and all(chunks)
    total = sum(sizes)
    # Each chunk is cut at the first bucket that reaches its share: at most one bucket over it.
    assert all(sum(b.layout.shard_numel for b in c) <= total / n + max(sizes) for c in chunks)


def _buckets(dtypes, reduce_dtype):
    """Buckets (one rank) over parameters of odd sizes in ``dtypes``, each holding a fresh random
    reduced shard; returns (buckets, fp64 copies of the shards)."""
    params = [torch.nn.Parameter(torch.zeros(n, dtype=dt)) for n, dt in zip([37, 1000, 5, 4099, 333, 64], dtypes)]
    layouts = plan_buckets(params, [0] * len(params), 1500, 1)
    buckets = [Bucket(i, lay, params, 0, reduce_dtype or lay.dtype, torch.device("cpu")) for i, lay in enumerate(layouts)]
    exact = []
    for b in buckets:
        b.grad_shard = (torch.randn(b.layout.shard_numel) * 3e3).to(b.reduce_dtype)
        exact.append(b.grad_shard.double())
        b.master.grad = None
    return buckets, exact


@pytest.mark.parametrize("deferred", [False, True])
@pytest.mark.parametrize("reduce_dtype", [torch.float16, torch.bfloat16, torch.float32, None])
def test_master_grads_unscale_cast_and_check(reduce_dtype, deferred):
    """``deferred``: every other bucket's sum still needs its 1/world-size factor (a gradient the
    copy-engine transport carried unscaled, ``GradSync.pending_factor``)."""
    dtypes = [torch.float16, torch.bfloat16, torch.float32] * 2
    buckets, exact = _buckets(dtypes, reduce_dtype)
    scale = torch.tensor([1024.0])
    keeps = lambda b: b.reduce_dtype == torch.float16  # noqa: E731 (as GradSync.keeps_scale with a scaler)
    factor = lambda b: 1.0 / 3 if deferred and b.index % 2 == 0 else 1.0  # noqa: E731
    flag = torch.zeros(1, dtype=torch.int32)
    found_inf = MasterGrads(buckets, torch.device("cpu"), factor).build(flag, scale, keeps)
    assert found_inf.item() == 0.0
    for b, ref in zip(buckets, exact):
        want = ref * factor(b) / (1024.0 if keeps(b) else 1.0)
        assert b.master.grad.dtype == torch.float32 and b.master.grad.shape == b.master.shape
        err = ((b.master.grad.double() - want).abs().max() / want.abs().max()).item()
        assert err <= TOLERANCE[b.reduce_dtype], (b.reduce_dtype, err)

    # A non-finite value in any shard raises the overflow flag.
    for bad in (float("nan"), float("inf")):
        buckets[-1].grad_shard[3] = bad
        flag.zero_()
        assert MasterGrads(buckets, torch.device("cpu"), factor).build(flag, scale, keeps).item() == 1.0


def _train(step_chunks: int, overlap: bool) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(13, 57), torch.nn.GELU(), torch.nn.Linear(57, 41), torch.nn.Tanh(),
                                torch.nn.Linear(41, 3)).half()
    named = list(model.named_parameters())
    inner = torch.optim.AdamW([{"params": [p for n, p in named if n.endswith("weight")], "weight_decay": 0.1},
                               {"params": [p for n, p in named if n.endswith("bias")], "lr": 3e-3}], lr=1e-3)
    opt = ZeroOptimizer(model, inner, bucket_size=300, step_chunks=step_chunks, overlap_param_gather=overlap)
    rank = torch.distributed.get_rank()
    for step in range(4):
        x = torch.randn(8, 13, generator=torch.Generator().manual_seed(100 * step + rank)).half()
        opt.backward(model(x).float().square().mean())
        opt.step()
        opt.zero_grad()
    opt.finish_param_sync()
    return {"chunks": len(opt._gather.chunks), "params": [p.detach().float().tolist() for p in model.parameters()]}


@pytest.mark.parametrize("world_size", [2, 3])
def test_chunked_step_equals_one_chunk(world_size):
    """Stepping and gathering chunk by chunk (param groups split across chunks) gives the same
    parameters, bit for bit, on every rank, as stepping everything at once."""
    whole = run_ranks(world_size, _train, 1, False)
    for chunks, overlap in ((3, False), (5, True)):
        parts = run_ranks(world_size, _train, chunks, overlap)
        assert all(r["chunks"] > 1 for r in parts)
        assert [r["params"] for r in parts] == [r["params"] for r in whole]
    assert all(r["params"] == whole[0]["params"] for r in whole)
