"""Fused gradient-bucket preparation: gather, scale, cast and non-finite check in one launch.

A bucket is a flat buffer split into *regions*, one per gradient, each starting at an aligned
offset and padded with zeros; the last region also covers the bucket's tail padding, so every
element of the bucket is written exactly once. The kernel reads each gradient through a table
of device addresses (no ``torch.cat``, no per-gradient launches), multiplies by one fp32 factor,
casts to the bucket's dtype and raises ``flag`` if any written value is not finite.

Example::

    plan = BucketPrepPlan.build([g.numel() for g in grads], region_offsets, bucket.numel(), device)
    sources = plan.source_table(grads, previous=sources)   # uploads only when addresses change
    prep_bucket(plan, sources, bucket, flag, factor=1 / world_size, src_dtype=grads[0].dtype)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

__all__ = ["BucketPrepPlan", "SourceTable", "prep_bucket", "default_block"]

_TORCH_TO_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
# Region offsets in the bucket are multiples of this many elements, so stores can be vectorised.
REGION_ALIGN = 16
# Compiled kernels by specialisation key (see ``prep_bucket``), launched without JITFunction.run.
_COMPILED: dict[tuple, object] = {}


@triton.jit
def _prep_bucket_kernel(
    bucket_ptr,  # *OUT [bucket numel]: written in full, padding included
    flag_ptr,  # *int32 [1]: set to 1 when any written value is NaN or +-inf
    src_table_ptr,  # *int64 [2, num_regions]: gradient addresses, then gradient numels (0: none)
    region_ptr,  # *int64 [2, num_regions]: region offsets in the bucket, then region lengths
    chunk_region_ptr,  # *int32 [num_chunks]: which region each program handles
    chunk_start_ptr,  # *int64 [num_chunks]: first element of that program's chunk in its region
    num_regions: tl.int32,
    factor: tl.float32,
    divisor_ptr,  # *fp32 [1]: the factor is divided by it when DIVIDE (a loss scale kept on device)
    SRC_DTYPE: tl.constexpr,
    DIVIDE: tl.constexpr,
    SRC_ALIGNED: tl.constexpr,  # every gradient address is a multiple of 16 bytes
    BLOCK: tl.constexpr,
    REGION_ALIGN: tl.constexpr,
):
    pid = tl.program_id(0)
    region = tl.load(chunk_region_ptr + pid)
    start = tl.multiple_of(tl.load(chunk_start_ptr + pid), BLOCK)
    addr = tl.load(src_table_ptr + region)
    if SRC_ALIGNED:
        addr = tl.multiple_of(addr, 16)
    src = addr.to(tl.pointer_type(SRC_DTYPE))
    numel = tl.load(src_table_ptr + num_regions + region)
    dst_off = tl.multiple_of(tl.load(region_ptr + region), REGION_ALIGN)
    region_len = tl.multiple_of(tl.load(region_ptr + num_regions + region), REGION_ALIGN)

    if DIVIDE:
        factor = factor / tl.load(divisor_ptr)
    offs = start + tl.arange(0, BLOCK)
    # Whole chunks take the unmasked (vectorised) path; only a gradient's tail chunk is masked.
    # Gradients are read once: "evict_first" leaves L2 to the bucket, which NCCL reads next.
    if start + BLOCK <= numel:
        x = tl.load(src + offs, eviction_policy="evict_first")
    else:
        x = tl.load(src + offs, mask=offs < numel, other=0.0, eviction_policy="evict_first")
    # fp32 math always: the interpreter's bf16 arithmetic is wrong, and fp32 keeps the factor exact.
    y = (x.to(tl.float32) * factor).to(bucket_ptr.dtype.element_ty)
    yf = y.to(tl.float32)
    # Each element that is not finite stores 1 to the flag (same value, so the race is benign):
    # no block-wide reduction, and no store at all in the common case.
    bad = (yf != yf) | (tl.abs(yf) == float("inf"))
    tl.store(flag_ptr + tl.zeros_like(offs), tl.full([BLOCK], 1, tl.int32), mask=bad)

    out = bucket_ptr + dst_off + offs
    if start + BLOCK <= region_len:
        tl.store(out, y)
    else:
        tl.store(out, y, mask=offs < region_len)


def default_block(device: torch.device) -> int:
    """Elements per program: small on GPUs (latency hiding), large under the CPU interpreter."""
    return 1024 if device.type == "cuda" else 1 << 15


@dataclass(frozen=True)
class BucketPrepPlan:
    """Static launch tables of one bucket layout, on the bucket's device.

    ``regions`` holds region offsets and lengths ([2, R], int64); ``chunk_region`` and
    ``chunk_start`` give one (region, first element) pair per program.
    """

    numels: tuple[int, ...]
    regions: torch.Tensor
    chunk_region: torch.Tensor
    chunk_start: torch.Tensor
    block: int

    @staticmethod
    def build(
        numels: list[int], offsets: list[int], bucket_numel: int, device: torch.device, block: int | None = None
    ) -> "BucketPrepPlan":
        block = block or default_block(device)
        if any(o % REGION_ALIGN for o in offsets):
            raise ValueError(f"region offsets must be multiples of {REGION_ALIGN}")
        ends = list(offsets[1:]) + [bucket_numel]
        lengths = [e - o for o, e in zip(offsets, ends)]
        if any(length < n for length, n in zip(lengths, numels)):
            raise ValueError("a region is shorter than its gradient")
        chunk_region, chunk_start = [], []
        for r, length in enumerate(lengths):
            starts = range(0, length, block)
            chunk_region += [r] * len(starts)
            chunk_start += list(starts)
        return BucketPrepPlan(
            numels=tuple(numels),
            regions=torch.tensor([offsets, lengths], dtype=torch.int64, device=device),
            chunk_region=torch.tensor(chunk_region, dtype=torch.int32, device=device),
            chunk_start=torch.tensor(chunk_start, dtype=torch.int64, device=device),
            block=block,
        )

    def source_table(self, grads: list[torch.Tensor | None], previous: SourceTable | None = None) -> SourceTable:
        """Device table of gradient addresses and numels ([2, R] int64), uploaded only when they
        differ from ``previous``: a steady-state step, whose gradients reuse their addresses,
        uploads nothing. A missing gradient (``None``) reads as zeros.
        """
        key = tuple(0 if g is None else g.data_ptr() for g in grads)
        if previous is not None and previous.key == key:
            return previous
        numels = [0 if g is None else n for g, n in zip(grads, self.numels)]
        # Pageable host memory: the copy is staged before it returns, so the host list may go.
        table = torch.tensor([key, numels], dtype=torch.int64).to(self.regions.device, non_blocking=True)
        return SourceTable(key, table, all(addr % 16 == 0 for addr in key))


@dataclass(frozen=True)
class SourceTable:
    """Gradient addresses of one bucket fill: host ``key`` and the device ``table`` built from it."""

    key: tuple[int, ...]
    table: torch.Tensor
    aligned: bool  # every address is a multiple of 16 bytes: the kernel may vectorise loads


def prep_bucket(
    plan: BucketPrepPlan,
    sources: SourceTable,
    bucket: torch.Tensor,
    flag: torch.Tensor,
    factor: float,
    src_dtype: torch.dtype,
    divisor: torch.Tensor | None = None,
    num_warps: int = 4,
) -> None:
    """Write ``bucket[region] = cast(grad * factor / divisor)`` for every region, zeros in the padding.

    Launches on the current stream. ``divisor`` (fp32, one element, optional) stays on the
    device, so a loss scale needs no host read. ``flag`` (int32, one element) is set to 1,
    never cleared, when a written value is not finite.
    """
    grid = (plan.chunk_region.numel(),)
    args = (bucket, flag, sources.table, plan.regions, plan.chunk_region, plan.chunk_start, len(plan.numels), float(factor),
            flag if divisor is None else divisor)
    meta = dict(SRC_DTYPE=_TORCH_TO_TL[src_dtype], DIVIDE=divisor is not None, SRC_ALIGNED=sources.aligned,
                BLOCK=plan.block, REGION_ALIGN=REGION_ALIGN)
    if not bucket.is_cuda:  # Triton interpreter: nothing compiled to cache
        _prep_bucket_kernel[grid](*args, **meta, num_warps=num_warps)
        return
    # Everything Triton specialises the compiled kernel on: dtypes, constexprs, warps, pointer
    # alignment (16 bytes) and the integer argument (== 1, multiple of 16).
    n = len(plan.numels)
    key = (bucket.device.index, bucket.dtype, flag.dtype, tuple(meta.values()), num_warps, n == 1, n % 16 == 0,
           tuple(t.data_ptr() % 16 == 0 for t in args if isinstance(t, torch.Tensor)))
    compiled = _COMPILED.get(key)
    if compiled is None:
        _COMPILED[key] = _prep_bucket_kernel[grid](*args, **meta, num_warps=num_warps)
    else:
        # The compiled kernel's own launcher: skips JITFunction.run's argument binding and cache
        # lookup, and the current stream is read with the device index given (torch's slow path
        # re-derives the device). Arguments in signature order.
        stream = torch._C._cuda_getCurrentRawStream(bucket.device.index)
        compiled[grid + (1, 1)](*args, *meta.values(), stream=stream)
