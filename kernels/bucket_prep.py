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

__all__ = ["BucketPrepPlan", "SourceTable", "prep_bucket", "default_block", "DEFAULT_WARPS"]

_TORCH_TO_TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}
# Region offsets in the bucket are multiples of this many elements, so stores can be vectorised.
REGION_ALIGN = 16
# Warps per program. With 2048-element blocks, 32 elements a thread (four 16-byte loads of a
# 16-bit gradient), in programs small enough that an SM holds many. Same gradients and bucket,
# interleaved rounds on H200 (benchmarks/RESULTS.md, eleventh session), against 4096 elements
# over 4 warps: 100M 89.4% of copy bandwidth against 87.8% (16-bit), 92.6 against 90.2 (-> fp32);
# 32M -> fp32 86.1 against 83.4; 32M 16-bit within noise (77-79% either way).
DEFAULT_WARPS = 2
# Compiled kernels by specialisation key (see ``prep_bucket``), launched without JITFunction.run.
_COMPILED: dict[tuple, "_DirectLaunch"] = {}


@triton.jit
def _prep_bucket_kernel(
    bucket_ptr,  # *OUT [bucket numel]: written in full, padding included
    flag_ptr,  # *int32 [1]: set to 1 when any written value is NaN or +-inf
    src_table_ptr,  # *int64 [2, num_regions]: gradient addresses, then gradient numels (0: none)
    region_ptr,  # *int64 [3, num_regions]: region offsets in the bucket, region lengths, first program
    chunk_ptr,  # *int8/16/32 [num_chunks]: each program's region (not read with one region)
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
    if num_regions == 1:  # Triton specialises an integer argument equal to 1: no table read
        region = 0
        start = pid * BLOCK
    else:
        region = tl.load(chunk_ptr + pid).to(tl.int32)
        start = (pid - tl.load(region_ptr + 2 * num_regions + region).to(tl.int32)) * BLOCK
    start = tl.multiple_of(start, BLOCK)
    src = tl.load(src_table_ptr + region).to(tl.pointer_type(SRC_DTYPE))
    if SRC_ALIGNED:
        # On the pointer, not on the integer address: the cast to a pointer drops what is known
        # about the integer, and the loads were then one element wide (32M fp16: 39.2 -> 37.6 us).
        src = tl.multiple_of(src, 16)
    # Both sides advance a scalar pointer to the chunk and index it with 32-bit offsets: 64-bit
    # per-element offsets cost registers, hence occupancy (32M fp16: 44 -> 29 registers, 11% faster).
    src = src + start
    src_left = tl.minimum(tl.load(src_table_ptr + num_regions + region) - start, BLOCK).to(tl.int32)
    dst = bucket_ptr + tl.multiple_of(tl.load(region_ptr + region), REGION_ALIGN) + start
    dst_left = tl.minimum(tl.load(region_ptr + num_regions + region) - start, BLOCK).to(tl.int32)

    if DIVIDE:
        factor = factor / tl.load(divisor_ptr)
    offs = tl.arange(0, BLOCK)
    # Whole chunks take the unmasked (vectorised) path; only a gradient's tail chunk is masked.
    # Gradients are read once: "evict_first" leaves L2 to the bucket, which NCCL reads next.
    if src_left == BLOCK:
        x = tl.load(src + offs, eviction_policy="evict_first")
    else:
        x = tl.load(src + offs, mask=offs < src_left, other=0.0, eviction_policy="evict_first")
    # fp32 math always: the interpreter's bf16 arithmetic is wrong, and fp32 keeps the factor exact.
    y = (x.to(tl.float32) * factor).to(bucket_ptr.dtype.element_ty)
    # Not finite <=> the written value's magnitude bits are inf's or above (NaNs lie above): one
    # integer max per block and at most one store. The written value, not the fp32 one before
    # the cast, keeps the GPU and the interpreter alike (the interpreter's fp32 -> bf16 cast
    # truncates where the GPU's rounds). A float test on y cast back to fp32 cost bf16 5% at
    # 32M; a per-element masked store of the flag, 2 KB of shared memory and 4-5%.
    if y.dtype.is_fp16():
        magnitude, inf_bits = y.to(tl.int16, bitcast=True) & 0x7FFF, 0x7C00
    elif y.dtype.is_bf16():
        magnitude, inf_bits = y.to(tl.int16, bitcast=True) & 0x7FFF, 0x7F80
    else:
        magnitude, inf_bits = y.to(tl.int32, bitcast=True) & 0x7FFFFFFF, 0x7F800000
    if tl.max(magnitude, axis=0) >= inf_bits:
        tl.store(flag_ptr, 1)

    if dst_left == BLOCK:
        tl.store(dst + offs, y)
    else:
        tl.store(dst + offs, y, mask=offs < dst_left)


def default_block(device: torch.device) -> int:
    """Elements per program: 2048 on GPUs (with ``DEFAULT_WARPS``, 32 a thread); large under the
    CPU interpreter, where each program costs about 0.5 ms.
    """
    return 2048 if device.type == "cuda" else 1 << 15


@dataclass(frozen=True)
class BucketPrepPlan:
    """Static launch tables of one bucket layout, on the bucket's device.

    ``regions`` holds region offsets, lengths and first programs ([3, R], int64); ``chunks`` each
    program's region ([num programs], the narrowest integer type that holds R - 1; ``None`` for one
    region), so program i handles elements from ``(i - first[region]) * block`` of its region. At
    one byte a program for up to 128 regions, the tables of a 400M-parameter model take about
    0.2 MB (2048-element programs) where (region, start) pairs took 1.1 MB, allocated for the
    whole run. ``programs`` is the grid and ``int_key`` what Triton specialises the kernel's
    integer argument R on (== 1, multiple of 16), kept so that a launch does not recompute them.
    """

    numels: tuple[int, ...]
    regions: torch.Tensor
    chunks: torch.Tensor | None
    block: int
    programs: int
    int_key: tuple[bool, bool]

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
        if any(length >= 1 << 31 for length in lengths):
            raise ValueError("a region of 2**31 elements or more (the kernel indexes regions in int32)")
        chunk_region, firsts = [], []
        for r, length in enumerate(lengths):
            firsts.append(len(chunk_region))
            chunk_region += [r] * -(-length // block)
        index_dtype = next(t for t in (torch.int8, torch.int16, torch.int32) if len(numels) <= torch.iinfo(t).max + 1)
        return BucketPrepPlan(
            numels=tuple(numels),
            regions=torch.tensor([offsets, lengths, firsts], dtype=torch.int64, device=device),
            chunks=torch.tensor(chunk_region, dtype=index_dtype, device=device) if len(numels) > 1 else None,
            block=block,
            programs=len(chunk_region),
            int_key=(len(numels) == 1, len(numels) % 16 == 0),
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
    num_warps: int = DEFAULT_WARPS,
) -> None:
    """Write ``bucket[region] = cast(grad * factor / divisor)`` for every region, zeros in the padding.

    Launches on the current stream. ``divisor`` (fp32, one element, optional) stays on the
    device, so a loss scale needs no host read. ``flag`` (int32, one element) is set to 1,
    never cleared, when a written value is not finite.
    """
    grid = (plan.programs,)
    chunks = plan.regions if plan.chunks is None else plan.chunks  # one region: a pointer never read
    tensors = (bucket, flag, sources.table, plan.regions, chunks, flag if divisor is None else divisor)
    scalars = (len(plan.numels), float(factor))
    meta = (_TORCH_TO_TL[src_dtype], divisor is not None, sources.aligned, plan.block, REGION_ALIGN)
    if not bucket.is_cuda:  # Triton interpreter: nothing compiled to cache
        _launch_jit(grid, tensors, scalars, meta, num_warps)
        return
    b, f, t, r, c, d = (x.data_ptr() for x in tensors)
    if (b | f | t | r | c | d) % 16:
        # Triton specialises each pointer on its own alignment; rare (a bucket that is a view
        # at an odd offset): not cached, Triton's own cache finds the kernel.
        _launch_jit(grid, tensors, scalars, meta, num_warps)
        return
    # Everything else Triton specialises the compiled kernel on: pointer dtypes, constexprs,
    # warps and the integer argument (== 1, multiple of 16).
    key = (bucket.device.index, bucket.dtype, flag.dtype, chunks.dtype, tensors[-1].dtype, meta, num_warps, plan.int_key)
    launch = _COMPILED.get(key)
    if launch is None:
        _COMPILED[key] = _DirectLaunch(_launch_jit(grid, tensors, scalars, meta, num_warps))
    else:
        # Arguments in signature order, pointers as integers.
        launch(plan.programs, torch._C._cuda_getCurrentRawStream(bucket.device.index), (b, f, t, r, c, *scalars, d, *meta))


def _launch_jit(grid, tensors, scalars, meta, num_warps):
    """Launch through Triton's JIT (binding, cache lookup, compiling on first use); returns the compiled kernel."""
    bucket, flag, table, regions, chunks, divisor = tensors
    src_dtype, divide, aligned, block, region_align = meta
    return _prep_bucket_kernel[grid](bucket, flag, table, regions, chunks, *scalars, divisor, SRC_DTYPE=src_dtype,
                                     DIVIDE=divide, SRC_ALIGNED=aligned, BLOCK=block, REGION_ALIGN=region_align,
                                     num_warps=num_warps)


class _DirectLaunch:
    """One compiled specialisation, launched by its own launcher with integer addresses.

    Triton's ``compiled[grid](...)`` builds a closure and launch metadata, calls two empty hook
    chains and looks up ``data_ptr`` per tensor: on one H200 machine 9.5-13.7 us of host time a
    launch, this 5-8 us (a torch kernel launch there: 9-11 us). Launch hooks (profilers such as
    proton) are honoured: while any is installed, launches go through Triton's path.
    """

    def __init__(self, compiled):
        compiled._init_handles()
        self.compiled = compiled
        self.run, self.function, self.packed_metadata = compiled.run, compiled.function, compiled.packed_metadata

    def __call__(self, programs: int, stream: int, args: tuple) -> None:
        hooks = triton.knobs.runtime
        if _hooked(hooks.launch_enter_hook) or _hooked(hooks.launch_exit_hook):
            self.compiled[(programs, 1, 1)](*args, stream=stream)
        else:
            self.run(programs, 1, 1, stream, self.function, self.packed_metadata, None, None, None, *args)


def _hooked(chain) -> bool:
    """A launch hook is installed (a ``HookChain`` with callbacks, or a bare callable)."""
    return chain is not None and bool(getattr(chain, "calls", True))
