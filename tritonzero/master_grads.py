"""fp32 master gradients from the reduced shards: cast, unscale and non-finite check in one pass.

After the reduce-scatters each bucket holds its reduced shard in the reduce dtype; the wrapped
optimizer steps fp32 masters and needs fp32 gradients. For 16-bit shards, one prep-kernel launch
per dtype (and per factor still to apply, see ``GradSync.pending_factor``) reads every bucket's
shard through its address table and writes one flat fp32 buffer, divided by the loss scale
where the sum kept it, raising the overflow flag on any non-finite value; each ``master.grad``
is a view of that buffer::

    grad_shard b0 (fp16) ─┐
    grad_shard b1 (fp16) ─┼─ one kernel: x / scale, cast, flag ──> [ b0 | b1 | b2 ] fp32
    grad_shard b2 (fp16) ─┘                                          views: master.grad

(A cast then an unscale pass would move 2.3x the bytes and launch one cast per bucket.) fp32
shards are already the master gradients; they are unscaled in place.
"""

from __future__ import annotations

import itertools
from typing import Callable

import torch

from tritonzero.bucket import Bucket
from tritonzero.kernels import BucketPrepPlan, SourceTable, prep_bucket

__all__ = ["MasterGrads"]


class MasterGrads:
    """Static plans (one per 16-bit reduce dtype and factor) that turn reduced shards into ``master.grad``."""

    def __init__(self, buckets: list[Bucket], device: torch.device, factor_of: Callable[[Bucket], float] = lambda b: 1.0):
        """``factor_of(bucket)``: what its reduced shard must still be multiplied by (1.0 unless a
        transport left the averaging to the step)."""
        groups: dict[tuple[torch.dtype, float], list[Bucket]] = {}
        for b in buckets:
            groups.setdefault((b.reduce_dtype, factor_of(b)), []).append(b)
        self._fp32 = [
            (group, torch.full((), factor, device=device)) for (dtype, factor), group in groups.items() if dtype == torch.float32
        ]
        self._passes: list[tuple[list[Bucket], list[int], BucketPrepPlan, float]] = []
        self._sources: dict[int, SourceTable] = {}  # per pass
        for (dtype, factor), group in groups.items():
            if dtype == torch.float32:
                continue
            numels = [b.layout.shard_numel for b in group]  # multiples of SHARD_ALIGN: aligned offsets
            offsets = [0, *itertools.accumulate(numels)][:-1]
            self._passes.append((group, offsets, BucketPrepPlan.build(numels, offsets, sum(numels), device), factor))

    def build(
        self, flag: torch.Tensor, scale: torch.Tensor | None, keeps_scale: Callable[[Bucket], bool]
    ) -> torch.Tensor:
        """Set every bucket's ``master.grad`` (on the current stream) and return the local overflow
        flag as fp32 (1.0: some value not finite), on top of ``flag`` (int32, raised by the prep
        kernels of backward). ``keeps_scale(bucket)``: its sum still carries ``scale``."""
        for i, (group, offsets, plan, factor) in enumerate(self._passes):
            dtype = group[0].reduce_dtype
            # Allocated per step and freed with the last view after the step: no memory during backward.
            flat = torch.empty(sum(plan.numels), dtype=torch.float32, device=flag.device)
            self._sources[i] = plan.source_table([b.grad_shard for b in group], previous=self._sources.get(i))
            prep_bucket(plan, self._sources[i], flat, flag, factor, dtype, scale if keeps_scale(group[0]) else None)
            for b, off, n in zip(group, offsets, plan.numels):
                b.master.grad = flat[off : off + n]
        found_inf = flag.float()
        for group, factor in self._fp32:
            for b in group:
                b.master.grad = b.grad_shard
            # fp32 sums never keep the scale (keeps_scale is fp16 only): a check, and a multiply by the factor.
            torch._amp_foreach_non_finite_check_and_unscale_([b.master.grad for b in group], found_inf, factor)
        return found_inf
