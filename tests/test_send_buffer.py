"""A bucket holding one gradient that fills it exactly reduces from that gradient in place.

The reduced shards must match an fp64 reference either way, and the reduce-scatter's input is
the gradient tensor autograd made exactly when it fits. On gloo prep scales that gradient in
place (1 / world size); on NCCL with a power-of-two world the collective scales it as it reads
it (PreMulSum), and the gradient is left as it was; where a loss scale divides gradients before
the sum, prep scales it in place with either transport.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.distributed as dist

from conftest import cpu_only
from distributed import run_ranks
from equivalence import DTYPES, shard_rel_err
import tritonzero.bucket
from tritonzero import ZeroOptimizer

LOSS_SCALE = 2.0  # a power of two: gradients divided by it in prep stay exact, so the test can see it
TOLERANCE = {"fp32": 1e-6, "bf16": 1e-2, "fp16": 2e-3}  # relative; the looser of parameter and reduce dtype applies


def _model(dtype: torch.dtype) -> torch.nn.Module:
    # With bucket_size=100 every weight and inp.bias (128) is larger than a bucket and gets its
    # own; out.bias (5) fills a padded one. On 2 ranks 640, 128 and 37 * 128 fit exactly; on 3 none.
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(37, 128), torch.nn.Tanh(), torch.nn.Linear(128, 5)).to(dtype)


def _optimizer(model: torch.nn.Module, dtype: torch.dtype, reduce_dtype: torch.dtype | None, transport: str,
               loss_scaled: bool = False) -> ZeroOptimizer:
    # fp16 sums keep the loss scale: 1.0 leaves the shards comparable. Other dtypes without a
    # scaler unless ``loss_scaled``: prep then divides their gradients by LOSS_SCALE before the sum.
    scale = LOSS_SCALE if loss_scaled else 1.0 if dtype == torch.float16 else None
    return ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), bucket_size=100, reduce_dtype=reduce_dtype,
                         loss_scale=scale, reduce_transport=transport)


def _inputs(rank: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(7, 37, generator=torch.Generator().manual_seed(100 + rank)).to(dtype)


def _reduce(dtype_name: str, reduce_name: str | None, loss_scaled: bool, device: str, transport: str) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[dtype_name]
    model = _model(dtype).to(device)
    ref = _model(dtype).double()
    # fp64 reference: the mean over ranks of each rank's gradient, every rank's input recomputed here.
    for r in range(world):
        (ref(_inputs(r, dtype).double()).square().mean() / world).backward()

    seen = {}  # the gradient tensor autograd handed over, and a copy of its values then

    def capture(p):
        seen[p] = (p.grad, p.grad.detach().clone())

    for p in model.parameters():  # registered first: runs before the optimizer takes the gradient
        p.register_post_accumulate_grad_hook(capture)
    opt = _optimizer(model, dtype, DTYPES[reduce_name] if reduce_name else None, transport, loss_scaled)
    calls = {}  # reduce-scatter output address -> (input address, average)
    reduce_scatter = tritonzero.bucket.reduce_scatter

    def recording(output, input, group, average=False):
        calls[output.data_ptr()] = (input.data_ptr(), average)
        return reduce_scatter(output, input, group, average)

    tritonzero.bucket.reduce_scatter = recording
    try:
        opt.backward(model(_inputs(rank, dtype).to(device)).square().mean())
        opt.finish_grad_sync()
    finally:
        tritonzero.bucket.reduce_scatter = reduce_scatter
    opt._prepare_grads()  # the fp32 master gradients the step takes (the copy-engine transport sums here)

    ref_grads = dict(zip(model.parameters(), (q.grad.reshape(-1) for q in ref.parameters())))
    out = []
    for b in opt.buckets:
        err = shard_rel_err(b, ref_grads, rank)
        # What prep multiplies a gradient by in place: 1 / world size, and 1 / the loss scale where
        # it divides (fp16 sums keep the scale).
        divisor = world * (LOSS_SCALE if loss_scaled and dtype != torch.float16 else 1.0)
        scaled = all(torch.equal(seen[p][0], (seen[p][1].float() / divisor).to(dtype)) for p in b.params)
        untouched = all(torch.equal(seen[p][0], seen[p][1]) for p in b.params)
        sent, average = calls.get(b.grad_shard.data_ptr(), (None, False))
        out.append({"params": len(b.params), "padded": b.layout.padded_numel, "numel": sum(b.layout.numels),
                    "rel_err": err, "scaled": scaled, "untouched": untouched, "average": average,
                    "collective": b.grad_shard.data_ptr() in calls, "transport": transport,
                    "from_grad": sent == seen[b.params[0]][0].data_ptr(), "nccl": dist.get_backend() == "nccl"})
    return out


def _nonfinite(dtype_name: str, device: str, transport: str) -> bool:
    """One inf on the last rank only, in the gradient that fits its bucket exactly on 2 ranks
    (``inp.weight``, whose element 0 is in rank 0's shard). True when every parameter kept its
    value: the step must be skipped on every rank, though on NCCL no prep kernel saw the inf."""
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[dtype_name]
    model = _model(dtype).to(device)

    def poison(p):
        p.grad.view(-1)[0] = float("inf")

    if rank == world - 1:  # registered first: runs before the optimizer takes the gradient
        model[0].weight.register_post_accumulate_grad_hook(poison)
    opt = _optimizer(model, dtype, None, transport)
    before = [p.detach().clone() for p in model.parameters()]
    opt.backward(model(_inputs(rank, dtype).to(device)).square().mean())
    opt.step()
    return all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))


REDUCE = {"same-dtype": (None, False), "reduce-fp32": ("fp32", False), "loss-scaled": (None, True)}  # (reduce dtype, scaler)


def every_case(device: str = "cpu", transport: str = "collective") -> dict:
    out = {f"{d}-{r}": _reduce(d, *REDUCE[r], device, transport) for d in DTYPES for r in REDUCE}
    return out | {f"nonfinite-{d}": _nonfinite(d, device, transport) for d in DTYPES}


@functools.cache
def _results(world_size: int) -> list[dict]:
    """Every case on ``world_size`` gloo ranks in one launch (process start-up dominates on CPU)."""
    return run_ranks(world_size, every_case)


def check(world_size: int, per_rank: list[dict], dtype_name: str, reduce_id: str) -> None:
    """Every shard matches the reference; exactly the fitting gradients were the collective's
    input, scaled in place by prep (gloo, or any transport where a loss scale divides them before
    the sum) or by the collective (NCCL, 2 ranks). The copy-engine transport calls no collective
    (its step applies 1 / world size)."""
    reduce_name, loss_scaled = REDUCE[reduce_id]
    divided = loss_scaled and dtype_name != "fp16"  # fp16 sums keep the scale; others are divided first
    in_place_seen = False
    for rank_results in per_rank:
        res = rank_results[f"{dtype_name}-{reduce_id}"]
        assert len(res) == 4, res
        for b in res:
            assert b["rel_err"] < max(TOLERANCE[dtype_name], TOLERANCE[reduce_name or dtype_name]), b
            exact = b["params"] == 1 and b["numel"] == b["padded"] and reduce_name in (None, dtype_name)
            in_place_seen |= exact
            if b["transport"] == "copy_engine":
                assert not b["collective"], b
                prepped_in_place = exact and divided
            else:
                assert b["from_grad"] == exact, b
                in_collective = exact and b["nccl"] and world_size & (world_size - 1) == 0 and not divided
                assert b["average"] == in_collective, b
                prepped_in_place = exact and not in_collective
            assert b["scaled"] if prepped_in_place else b["untouched"], b
    # Only on 2 ranks, with the reduce dtype the parameters' own, does any bucket fit exactly.
    assert in_place_seen == (world_size == 2 and reduce_name in (None, dtype_name))


@cpu_only
@pytest.mark.parametrize("reduce_id", list(REDUCE))
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("world_size", [2, 3])
def test_exact_fit_reduces_in_place(world_size, dtype_name, reduce_id):
    check(world_size, _results(world_size), dtype_name, reduce_id)


@cpu_only
@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("world_size", [2, 3])
def test_nonfinite_exact_fit_gradient_skips_step(world_size, dtype_name):
    assert all(r[f"nonfinite-{dtype_name}"] for r in _results(world_size))
