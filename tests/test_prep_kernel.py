"""The fused bucket-prep kernel against a torch fp64 reference."""

from __future__ import annotations

import math
import random

import pytest
import torch

from tritonzero.kernels import BucketPrepPlan, bucket_prep, prep_bucket
from tritonzero.kernels.bucket_prep import REGION_ALIGN

DEVICES = ["cuda"] if torch.cuda.is_available() else ["cpu"]  # see conftest.py
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Relative tolerance of the output: one rounding of the fp32 product into the output dtype.
RTOL = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}
SIZES = [1, 7, 1023, 4097, 33, 70001, 16, 5]


def _layout(sizes: list[int], world_size: int) -> tuple[list[int], int]:
    offsets, end = [], 0
    for n in sizes:
        offsets.append(end)
        end += -(-n // REGION_ALIGN) * REGION_ALIGN
    return offsets, -(-(end + 1) // (64 * world_size)) * 64 * world_size


def _reference(grads, offsets, numel, factor):
    ref = torch.zeros(numel, dtype=torch.float64)
    for g, off in zip(grads, offsets):
        if g is not None:
            ref[off : off + g.numel()] = g.detach().cpu().double().reshape(-1) * factor
    return ref


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block", [64, None], ids=["block64", "default-block"])
@pytest.mark.parametrize("src_dtype", DTYPES, ids=str)
@pytest.mark.parametrize("out_dtype", DTYPES, ids=str)
def test_prep_matches_reference(device, block, src_dtype, out_dtype):
    sizes = random.Random().sample(SIZES, k=len(SIZES))  # fresh order: regions land at new offsets
    grads = [torch.randn(n, device=device).to(src_dtype) for n in sizes]
    # A source at an address that is not 16-byte aligned takes the kernel's unaligned path.
    grads[3] = torch.randn(sizes[3] + 1, device=device).to(src_dtype)[1:]
    grads[5] = None  # a parameter without a gradient reads as zeros
    offsets, numel = _layout(sizes, world_size=3)
    plan = BucketPrepPlan.build(sizes, offsets, numel, torch.device(device), block=block)
    bucket = torch.full((numel,), float("nan"), device=device, dtype=out_dtype)  # poison
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    factor = random.uniform(0.1, 2.0)

    prep_bucket(plan, plan.source_table(grads), bucket, flag, factor, src_dtype)

    ref = _reference(grads, offsets, numel, factor)
    out = bucket.cpu().double()
    assert torch.isfinite(out).all(), "an element of the bucket (padding included) was not written"
    torch.testing.assert_close(out, ref.to(out_dtype).double(), rtol=RTOL[out_dtype], atol=0)
    assert flag.item() == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("regions", [1, 3, 128, 129, 300])
def test_region_counts(device, regions):
    """One region needs no program table; up to 128 regions index it in int8, more in int16."""
    rng = random.Random()
    sizes = [rng.randrange(1, 200) for _ in range(regions)]
    grads = [torch.randn(n, device=device, dtype=torch.float16) for n in sizes]
    offsets, numel = _layout(sizes, world_size=2)
    plan = BucketPrepPlan.build(sizes, offsets, numel, torch.device(device), block=64)
    want = None if regions == 1 else torch.int8 if regions <= 128 else torch.int16
    assert (plan.chunks.dtype if plan.chunks is not None else None) == want
    bucket = torch.full((numel,), float("nan"), device=device, dtype=torch.float32)  # poison
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    factor = rng.uniform(0.1, 2.0)
    prep_bucket(plan, plan.source_table(grads), bucket, flag, factor, torch.float16)
    ref = _reference(grads, offsets, numel, factor)
    torch.testing.assert_close(bucket.cpu().double(), ref.float().double(), rtol=1e-6, atol=0)


def _edges(dtype: torch.dtype) -> list[float]:
    """fp32 values on both sides of where a cast to ``dtype`` stops being finite, and beyond."""
    top = torch.finfo(dtype).max
    if dtype != torch.float32:  # round-to-nearest: halfway to the next power of two is inf
        top = (top + math.ldexp(1.0, math.frexp(top)[1])) / 2
    top32 = torch.tensor(top, dtype=torch.float64).float()  # exact: both values have few bits
    below = torch.nextafter(top32, torch.tensor(0.0)).item()
    return [below, -below, top32.item(), -top32.item(), float("inf"), float("-inf"), float("nan"), 1.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", DTYPES, ids=str)
def test_flag_raised_exactly_on_non_finite(device, out_dtype):
    """The flag rises exactly when a written value is not finite, and that is when torch's own
    cast of the scaled value is not finite, at the edge of each dtype's range too (fp16:
    65519.996 is written as 65504, 65520 as inf)."""
    sizes = [1023, 4097, 7]
    offsets, numel = _layout(sizes, world_size=2)
    plan = BucketPrepPlan.build(sizes, offsets, numel, torch.device(device), block=1024)
    bucket = torch.empty(numel, device=device, dtype=out_dtype)
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    grads = [torch.randn(n, device=device) for n in sizes]
    prep_bucket(plan, plan.source_table(grads), bucket, flag, 1.0, torch.float32)
    assert flag.item() == 0

    for value in _edges(out_dtype):
        flag.zero_()
        which = random.randrange(len(sizes))
        where = random.randrange(sizes[which])
        old = grads[which][where].item()
        grads[which][where] = value
        prep_bucket(plan, plan.source_table(grads), bucket, flag, 1.0, torch.float32)
        grads[which][where] = old
        written = bool(torch.isfinite(bucket[offsets[which] + where]))
        assert flag.item() == (0 if written else 1), value
        if device == "cuda" or out_dtype != torch.bfloat16:  # the interpreter truncates fp32 -> bf16
            assert written == bool(torch.isfinite(torch.tensor([value]).to(out_dtype))), value


@pytest.mark.parametrize("device", DEVICES)
def test_source_table_reused_while_addresses_stay(device):
    sizes = [7, 1023]
    offsets, numel = _layout(sizes, world_size=1)
    plan = BucketPrepPlan.build(sizes, offsets, numel, torch.device(device))
    grads = [torch.randn(n, device=device) for n in sizes]
    first = plan.source_table(grads)
    assert plan.source_table(grads, previous=first) is first
    moved = [grads[0], grads[1].clone()]
    second = plan.source_table(moved, previous=first)
    assert second is not first and second.key[1] == moved[1].data_ptr()


def test_plan_rejects_what_the_kernel_cannot_index():
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="multiples"):
        BucketPrepPlan.build([5, 5], [0, 8], 32, cpu)
    with pytest.raises(ValueError, match="shorter"):
        BucketPrepPlan.build([5, 40], [0, 16], 48, cpu)
    with pytest.raises(ValueError, match="int32"):  # chunk starts are int32 in the kernel
        BucketPrepPlan.build([1 << 31], [0], 1 << 31, cpu)


@pytest.mark.parametrize("device", DEVICES)
def test_device_divisor(device):
    """The loss scale can stay on the device: factor / divisor, read inside the kernel."""
    sizes = [1023, 77]
    offsets, numel = _layout(sizes, world_size=2)
    plan = BucketPrepPlan.build(sizes, offsets, numel, torch.device(device), block=512)
    grads = [torch.randn(n, device=device, dtype=torch.float16) for n in sizes]
    bucket = torch.full((numel,), float("nan"), device=device, dtype=torch.float32)
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    divisor = torch.tensor([random.choice([2.0**16, 3.0, 0.25])], device=device)
    prep_bucket(plan, plan.source_table(grads), bucket, flag, 0.5, torch.float16, divisor=divisor)
    ref = _reference(grads, offsets, numel, 0.5 / divisor.item())
    torch.testing.assert_close(bucket.cpu().double(), ref.float().double(), rtol=1e-6, atol=0)


CUDA_ONLY = pytest.mark.skipif(not torch.cuda.is_available(), reason="the compiled-kernel launch path is CUDA-only")


def _launch_case(bucket_dtype=torch.bfloat16):
    sizes = [4097, 33, 70001]
    offsets, numel = _layout(sizes, world_size=2)
    plan = BucketPrepPlan.build(sizes, offsets, numel, torch.device("cuda"), block=256)
    storage = torch.empty(numel + 1, device="cuda", dtype=bucket_dtype)
    return sizes, offsets, numel, plan, storage


@CUDA_ONLY
@pytest.mark.parametrize("misaligned_bucket", [False, True], ids=["aligned", "misaligned-bucket"])
def test_compiled_launch_path(misaligned_bucket, monkeypatch):
    """The first launch of a specialisation goes through Triton's JIT, later ones call the
    compiled kernel directly with integer addresses: both write the same values. A bucket that
    breaks the 16-byte alignment goes through the JIT every time (Triton specialises on it)."""
    monkeypatch.setattr(bucket_prep, "_COMPILED", {})
    jit_launches = []
    jit = bucket_prep._launch_jit
    monkeypatch.setattr(bucket_prep, "_launch_jit", lambda *a: jit_launches.append(1) or jit(*a))
    sizes, offsets, numel, plan, storage = _launch_case()
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    bucket = storage[1:] if misaligned_bucket else storage[:-1]
    for _ in range(3):  # the same specialisation each time
        grads = [torch.randn(n, device="cuda", dtype=torch.float16) for n in sizes]
        factor = random.uniform(0.1, 2.0)
        bucket.fill_(float("nan"))
        prep_bucket(plan, plan.source_table(grads), bucket, flag, factor, torch.float16)
        ref = _reference(grads, offsets, numel, factor)
        torch.testing.assert_close(bucket.cpu().double(), ref.to(torch.bfloat16).double(), rtol=RTOL[torch.bfloat16], atol=0)
    assert flag.item() == 0
    assert len(jit_launches) == (3 if misaligned_bucket else 1)
    assert len(bucket_prep._COMPILED) == (0 if misaligned_bucket else 1)


@CUDA_ONLY
def test_launch_hooks_see_direct_launches():
    """A Triton launch hook (what profilers such as proton install) sees every launch, the
    direct ones included."""
    import triton  # imported here: importing triton before tritonzero.kernels would skip the CPU interpreter

    sizes, offsets, numel, plan, storage = _launch_case(torch.float16)
    grads = [torch.randn(n, device="cuda", dtype=torch.float16) for n in sizes]
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    prep_bucket(plan, plan.source_table(grads), storage[:-1], flag, 0.5, torch.float16)  # compiled, cached
    seen = []
    hook = seen.append
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        for _ in range(3):
            prep_bucket(plan, plan.source_table(grads), storage[:-1], flag, 0.5, torch.float16)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    torch.cuda.synchronize()
    assert len(seen) == 3
    ref = _reference(grads, offsets, numel, 0.5)
    torch.testing.assert_close(storage[:-1].cpu().double(), ref.half().double(), rtol=RTOL[torch.float16], atol=0)
