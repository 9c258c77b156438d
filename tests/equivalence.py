"""Equivalence cases: N ranks of ZeroOptimizer against a one-process fp64 reference.

Every rank trains on its slice of one global batch; the reference trains the same initial
model in fp64 on the whole batch with the same torch optimizer. Compared: the update
(final - initial parameters) of the fp32 master weights, relative to the reference update, so a
wrong averaging or unscaling factor shows as an error near 1. The model's own (fp16/bf16)
parameters must equal the master weights cast to their dtype, on every rank.
"""

from __future__ import annotations

import contextlib
import copy

import torch
import torch.distributed as dist

from tritonzero import ZeroOptimizer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# dtype "mixed": each layer its own dtype, as in mixed-precision models (16-bit layers beside fp32
# ones). One bucket stream per dtype, so a step chunk gathers buckets of several dtypes; the
# fp16 layer turns the dynamic loss scale on for every bucket.
MIXED = {"inp": torch.bfloat16, "mid": torch.float32, "out": torch.float16, "unused": torch.bfloat16}
# Relative error of the update. fp32: fp32 arithmetic and fp32 parameter storage against fp64
# (with clipping the updates are small, so rounding the parameters shows: up to 2e-5). bf16/fp16: the model's own
# forward and backward run in that dtype (8 and 11 bits of mantissa) while the reference is fp64.
# Adam normalises each element's update, so it magnifies the noise of small gradients: looser.
# bf16 AdamW: one process with no sync at all is 4.1% off on CPU; on H200s (cuBLAS's bf16 GEMMs)
# 2 ranks were 4.96% off and 4 ranks 5.1-5.2%, the same with an fp32 reduction (fifteenth session).
TOLERANCE = {
    ("sgd", "fp32"): 1e-4, ("sgd", "bf16"): 1e-2, ("sgd", "fp16"): 3e-3,
    ("adamw", "fp32"): 1e-4, ("adamw", "bf16"): 6e-2, ("adamw", "fp16"): 4e-2,
    ("sgd", "mixed"): 1e-2, ("adamw", "mixed"): 6e-2,  # bf16's, the loosest of its dtypes
}
GLOBAL_BATCH = 48  # divisible by 1, 2, 3, 4 and 8 ranks, and by 2 micro-batches on each


class Net(torch.nn.Module):
    """Odd sizes; ``unused`` gets no gradient unless ``use_all``. ``mid_width`` 1531 makes
    ``mid.weight`` 68,895 elements, above the copy engine's ``DIRECT_MIN_ELEMENTS``. Each layer
    casts its input to its own dtype, so its layers may differ in dtype (``MIXED``)."""

    def __init__(self, use_all: bool = True, mid_width: int = 33):
        super().__init__()
        self.inp = torch.nn.Linear(17, 45)
        self.mid = torch.nn.Linear(45, mid_width)
        self.out = torch.nn.Linear(mid_width, 7)
        self.unused = torch.nn.Linear(5, 3)
        self.use_all = use_all

    def forward(self, x):
        h = torch.nn.functional.gelu(self.inp(x.to(self.inp.weight.dtype)))
        h = torch.tanh(self.mid(h.to(self.mid.weight.dtype)))
        y = self.out(h.to(self.out.weight.dtype))
        if self.use_all:
            y = y + self.unused.weight.sum() * 1e-2 + self.unused.bias.sum()
        return y


def _optimizer(name: str, model: torch.nn.Module, lr: float | None, fused: bool):
    extra = {"fused": True} if fused else {}
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr or 0.05, momentum=0.9, **extra)
    params = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in params if n.endswith("weight")], "weight_decay": 0.1},
        {"params": [p for n, p in params if n.endswith("bias")], "weight_decay": 0.0, "lr": 2e-3},
    ]
    return torch.optim.AdamW(groups, lr=lr or 1e-3, **extra)


def full_masters(opt: ZeroOptimizer) -> dict[int, torch.Tensor]:
    """Every parameter's fp32 master value, gathered from all ranks' shards (keyed by id)."""
    out = {}
    for b in opt.buckets:
        full = torch.empty(b.layout.padded_numel, dtype=torch.float32, device=b.master.device)
        if opt.world_size > 1:
            dist.all_gather_into_tensor(full, b.master.contiguous())
        else:
            full.copy_(b.master)
        for p, off, n in zip(b.params, b.layout.offsets, b.layout.numels):
            out[id(p)] = full[off : off + n].view_as(p)
    return out


def shard_rel_err(bucket, ref_grads: dict, rank: int) -> float:
    """``bucket``'s fp32 master gradient on ``rank`` against the fp64 reference gradients (flat,
    keyed by parameter) laid out as the bucket lays them out, relative to the whole bucket's
    norm (a shard may be all padding); the absolute error where the whole bucket got no gradient."""
    full = torch.zeros(bucket.layout.padded_numel, dtype=torch.float64)
    for p, off, n in zip(bucket.params, bucket.layout.offsets, bucket.layout.numels):
        full[off : off + n] = ref_grads[p]
    want = full[slice(*bucket.layout.shard_range(rank))]
    err = (bucket.master.grad.cpu().double() - want).norm()
    return (err / full.norm() if full.norm() > 0 else err).item()


def run_case(opt_name: str, dtype_name: str, bucket_size: int, steps: int = 3, use_all: bool = True,
             grad_scale: float = 1.0, lr: float | None = None, device: str = "cpu", reduce_dtype: str | None = None,
             accum: int = 1, clip: float | None = None, fused: bool = False, bad_step: int | None = None,
             overlap_gather: bool = False, reduce_transport: str = "collective", mid_width: int = 33,
             keep_grads: bool = False) -> dict:
    """Train ``steps`` steps on this rank and on the reference; return the relative update error.

    ``accum`` micro-batches per step (all but the last under ``no_sync``), ``clip`` a global
    gradient-norm bound, ``bad_step`` a step whose loss is infinite on the last rank (skipped
    everywhere; the reference never takes it), ``overlap_gather`` parameter all-gathers waited
    for by forward pre-hooks (with ``use_all`` the model reads ``unused``'s parameters outside
    that module's forward, which this mode does not support), ``keep_grads`` the copy engine's
    ``keep_grads_until_step`` (``"kept"``: in the last step, the buckets whose shard on this rank
    is a view, a slice of one of their gradients, not a tensor of its own).
    """
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    torch.manual_seed(1234)
    model = Net(use_all, mid_width).to(device)
    for name, layer in model.named_children():
        layer.to(MIXED[name] if dtype_name == "mixed" else DTYPES[dtype_name])
    ref = copy.deepcopy(model).double()  # starts from the same (rounded) values
    ref_opt = _optimizer(opt_name, ref, lr, fused=False)
    opt = ZeroOptimizer(model, _optimizer(opt_name, model, lr, fused), bucket_size=bucket_size,
                        reduce_dtype=DTYPES[reduce_dtype] if reduce_dtype else None, overlap_param_gather=overlap_gather,
                        reduce_transport=reduce_transport, keep_grads_until_step=keep_grads)
    start = {id(p): q.detach().clone() for p, q in zip(model.parameters(), ref.parameters())}

    gen = torch.Generator().manual_seed(99)
    local = GLOBAL_BATCH // world
    micro = local // accum
    norms, kept = [], 0
    for step in range(steps):
        x = torch.randn(GLOBAL_BATCH, 17, generator=gen).to(device)
        y = torch.randn(GLOBAL_BATCH, 7, generator=gen).to(device)
        xs, ys = x[rank * local : (rank + 1) * local], y[rank * local : (rank + 1) * local]
        poison = float("inf") if step == bad_step and rank == world - 1 else 1.0
        for m in range(accum):
            xm, ym = xs[m * micro : (m + 1) * micro], ys[m * micro : (m + 1) * micro]
            loss = torch.nn.functional.mse_loss(model(xm).float(), ym) * (grad_scale * poison / accum)
            with opt.no_sync() if m < accum - 1 else contextlib.nullcontext():
                opt.backward(loss)
        opt.finish_grad_sync()
        kept = sum(b.grad_shard is not None and b.grad_shard._base is not None for b in opt.buckets)
        if clip is not None:
            norms.append(float(opt.clip_grad_norm_(clip)))
        opt.step()
        opt.zero_grad()

        if step == bad_step:
            continue
        ref_loss = torch.nn.functional.mse_loss(ref(x.double()), y.double()) * grad_scale
        ref_loss.backward()
        for p in ref.parameters():  # documented: no gradient counts as a zero gradient
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if clip is not None:
            ref_norm = float(torch.nn.utils.clip_grad_norm_(ref.parameters(), clip))
            if abs(norms[-1] - ref_norm) > 1e-2 * ref_norm:
                raise AssertionError(f"rank {rank}: global norm {norms[-1]} != reference {ref_norm}")
        ref_opt.step()
        ref_opt.zero_grad()

    opt.finish_param_sync()  # parameters are read below, outside any module's forward
    masters = full_masters(opt)
    num = den = 0.0
    for p, q in zip(model.parameters(), ref.parameters()):
        m = masters[id(p)].double()
        if not torch.equal(p.detach(), m.to(p.dtype)):
            raise AssertionError(f"rank {rank}: model parameter differs from its gathered master weight")
        d_ref = q.detach() - start[id(p)]
        num += (m - start[id(p)] - d_ref).square().sum().item()
        den += d_ref.square().sum().item()
    return {"rel_err": (num / den) ** 0.5, "loss_scale": opt.loss_scale, "buckets": len(opt.buckets), "norms": norms,
            "kept": kept}
