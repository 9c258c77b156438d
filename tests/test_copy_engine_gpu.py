"""The copy-engine transport's copies straight from the gradients, on 2 and 4 GPUs (each skipped with fewer).

Buckets of large gradients in the reduce dtype skip the prep kernel: each gradient's parts are
copied into the peer's slot and this rank's shard, and the step applies 1 / world size. Checked
against an fp64 reference: gaps between regions and the bucket's padding, a parameter with a
gradient in one step and none in the next (its slot parts must be zeroed, not left stale), the
buckets that must still be prepped (small gradients, a cast to fp32), and a non-finite gradient
on one rank that must skip the step on every rank. Slots and shards start poisoned with NaN.
The same with ``keep_grads_until_step``, where a rank's slice kept inside its gradient is summed in place.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

import tritonzero.bucket
from distributed import gpu_worlds, run_ranks
from equivalence import DTYPES, shard_rel_err
from tritonzero import ZeroOptimizer
from tritonzero.copy_engine import DIRECT_MIN_ELEMENTS, CopyEngineReduce
from tritonzero.layout import plan_buckets

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")

TOLERANCE = {"fp32": 1e-6, "bf16": 1e-2, "fp16": 2e-3}  # relative, of a shard against the fp64 reference


class _Net(torch.nn.Module):
    """Weights of 190,643 / 161,219 / 79,163 elements: with their biases (613 / 263 / 301, not
    multiples of REGION_ALIGN, so regions have gaps) one bucket averages 72,034 elements a
    gradient, above DIRECT_MIN_ELEMENTS; alone, the biases and ``side.weight`` average 20,085."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(311, 613)
        self.fc2 = torch.nn.Linear(613, 263)
        self.side = torch.nn.Linear(263, 301)

    def forward(self, x: torch.Tensor, use_side: bool) -> torch.Tensor:
        y = self.fc2(torch.nn.functional.gelu(self.fc1(x)))
        return y + self.side(y)[..., :263] if use_side else y


def _model(dtype: torch.dtype) -> _Net:
    torch.manual_seed(0)
    return _Net().to(dtype)


def _inputs(rank: int, step: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(9, 311, generator=torch.Generator().manual_seed(100 * step + rank)).to(dtype)


def _optimizer(model: _Net, dtype: torch.dtype, bucket_size: int, reduce_dtype: torch.dtype | None,
               keep: bool = False) -> ZeroOptimizer:
    # fp16 sums keep the loss scale (1.0 leaves the shards comparable); no scaler otherwise.
    return ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), bucket_size=bucket_size,
                         reduce_dtype=reduce_dtype, loss_scale=1.0 if dtype == torch.float16 else None,
                         reduce_transport="copy_engine", keep_grads_until_step=keep)


def _reduce(dtype_name: str, bucket_size: int, reduce_name: str | None, keep: bool) -> list[list[dict]]:
    """Two steps (``side`` used, then not); per step and bucket: the shard's error, whether prep
    ran and whether the shard is the gradient's own memory (``keep_grads_until_step``)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[dtype_name]
    model = _model(dtype).cuda()
    # Poisoned: the receive slots as allocated (all bits set: NaN in every float dtype; only the
    # transport's zeroing makes their padding read as zeros) and each shard before the copies.
    empty = symm_mem.empty
    symm_mem.empty = lambda *args, **kwargs: empty(*args, **kwargs).fill_(255)
    try:
        opt = _optimizer(model, dtype, bucket_size, DTYPES[reduce_name] if reduce_name else None, keep)
    finally:
        symm_mem.empty = empty
    bucket_of_plan = {id(b.plan): b.index for b in opt.buckets}
    prepped: set[int] = set()
    kept: set[int] = set()
    prep_bucket, push_grads = tritonzero.bucket.prep_bucket, CopyEngineReduce.push_grads
    new_shard = tritonzero.bucket.Bucket.new_shard

    def recording(plan, *args):
        prepped.add(bucket_of_plan[id(plan)])
        return prep_bucket(plan, *args)

    def recording_kept(transport, bucket):
        push_grads(transport, bucket)
        storage = bucket.grad_shard.untyped_storage().data_ptr()
        if any(g is not None and g.untyped_storage().data_ptr() == storage for g in bucket.grads):
            kept.add(bucket.index)

    steps = []
    tritonzero.bucket.prep_bucket, CopyEngineReduce.push_grads = recording, recording_kept
    tritonzero.bucket.Bucket.new_shard = lambda bucket: new_shard(bucket).fill_(float("nan"))
    try:
        for step, use_side in enumerate([True, False]):
            prepped.clear()
            kept.clear()
            ref = _model(dtype).double()
            for r in range(world):  # fp64 reference: the mean over ranks, every rank's input recomputed here
                (ref(_inputs(r, step, dtype).double(), use_side).square().mean() / world).backward()
            ref_grads = {p: (q.grad if q.grad is not None else torch.zeros_like(q)).reshape(-1)
                         for p, q in zip(model.parameters(), ref.parameters())}
            opt.backward(model(_inputs(rank, step, dtype).cuda(), use_side).square().mean())
            opt.finish_grad_sync()
            opt._prepare_grads()  # the copies are summed and averaged here
            steps.append([{"rel_err": shard_rel_err(b, ref_grads, rank), "prepped": b.index in prepped,
                           "kept": b.index in kept} for b in opt.buckets])
            opt.zero_grad()  # parameters unchanged: the next step's reference starts from the same model
    finally:
        tritonzero.bucket.prep_bucket, CopyEngineReduce.push_grads = prep_bucket, push_grads
        tritonzero.bucket.Bucket.new_shard = new_shard
    return steps


def _nonfinite(dtype_name: str) -> bool:
    """An inf in ``fc2.weight``'s gradient (copied without prep) on the last rank only: True when
    the step left every parameter as it was."""
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[dtype_name]
    model = _model(dtype).cuda()

    def poison(p):
        p.grad.view(-1)[12345] = float("inf")

    if rank == world - 1:  # registered first: runs before the optimizer takes the gradient
        model.fc2.weight.register_post_accumulate_grad_hook(poison)
    opt = _optimizer(model, dtype, 10**6, None)
    before = [p.detach().clone() for p in model.parameters()]
    opt.backward(model(_inputs(rank, 0, dtype).cuda(), True).square().mean())
    opt.step()
    return all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))


# (bucket size, reduce dtype) -> per bucket, in order: whether it is prepped (the rest are copied).
CASES = {
    (10**6, None): [False],  # one bucket of every gradient
    (150_000, None): [False, True, False],  # fc2.weight, the small ones (prepped), fc1.weight (padded)
    (10**6, "fp32"): [True],  # a cast before the sum: prepped
    (79_000, None): [False, False, True, False],  # side.weight, fc2.weight, the biases, fc1.weight
}
# The same with keep_grads_until_step, which gives every weight a bucket of its own at any bucket
# size (as 79,000 does without it): a copied bucket is kept on the ranks whose slice lies inside
# one gradient that this step has (``_kept_gradient``): each weight's bucket, except on the last
# rank (its slice holds the padding), and side.weight's only in the step that uses it.
KEEP_CASES = {(10**6, None): [False, False, True, False]}
_SIDE = (4, 5)  # indices of side.weight and side.bias in the model's parameters: no gradient in step 1


def _cases(dtype_name: str) -> list[tuple[int, str | None, bool]]:
    plain = [(size, r, False) for size, r in CASES if r != dtype_name]  # fp32 -> fp32 is no cast
    return plain + [(size, r, True) for size, r in KEEP_CASES]


def _layouts(size: int, world: int, keep: bool) -> list:
    params = list(_model(torch.float32).parameters())
    return plan_buckets(params, [0] * len(params), size, world, DIRECT_MIN_ELEMENTS if keep else None)


def _kept_gradient(layout, rank: int) -> int | None:
    """The index of the parameter whose gradient holds ``rank``'s whole slice of ``layout``, if any."""
    lo, hi = layout.shard_range(rank)
    inside = [i for i, off, n in zip(layout.param_indices, layout.offsets, layout.numels) if off <= lo and hi <= off + n]
    return inside[0] if inside else None


def _every_case() -> dict:
    out = {f"{d}-{size}-{r}-{keep}": _reduce(d, size, r, keep) for d in DTYPES for size, r, keep in _cases(d)}
    return out | {f"nonfinite-{d}": _nonfinite(d) for d in DTYPES}


@pytest.mark.parametrize("world", gpu_worlds(2, 4))
def test_copy_engine_copies_from_gradients(world):
    per_rank = run_ranks(world, _every_case, backend="nccl")
    for rank, results in enumerate(per_rank):
        for dtype_name in DTYPES:
            assert results[f"nonfinite-{dtype_name}"], (rank, dtype_name)  # step skipped everywhere
            for size, reduce_name, keep in _cases(dtype_name):
                prepped = (KEEP_CASES if keep else CASES)[size, reduce_name]
                holder = [_kept_gradient(lay, rank) if keep and not p else None
                          for p, lay in zip(prepped, _layouts(size, world, keep))]
                steps = results[f"{dtype_name}-{size}-{reduce_name}-{keep}"]
                tol = TOLERANCE[dtype_name]
                for step, buckets in enumerate(steps):
                    kept = [i is not None and (step == 0 or i not in _SIDE) for i in holder]
                    print(f"rank {rank} {dtype_name} {size} {reduce_name} keep={keep} step {step}: "
                          + " ".join(f"{b['rel_err']:.1e}{'p' if b['prepped'] else 'k' if b['kept'] else 'c'}" for b in buckets))
                    assert [b["prepped"] for b in buckets] == prepped, (rank, dtype_name, size, step, buckets)
                    assert [b["kept"] for b in buckets] == kept, (rank, dtype_name, size, keep, step, buckets)
                    assert all(b["rel_err"] < tol for b in buckets), (rank, dtype_name, size, step, buckets)
            if rank < world - 1:  # the case exercises keeping: every weight's bucket is kept here in step 0
                assert sum(b["kept"] for b in results[f"{dtype_name}-1000000-None-True"][0]) == 3, (rank, dtype_name)
