"""Bucket-prep kernel against the device's copy bandwidth and torch's unfused ways (one GPU).

    python benchmarks/bench_prep.py [--quick]

Gradients are a GPT-style transformer's parameter list (per layer 2 LayerNorms, qkv, proj,
fc1, fc2 with biases and 4 small gains: 16 tensors a layer, 24 layers); the width d is chosen per
bucket size so that a bucket holds about two layers (d=256 for 1M up to d=2048 for 100M), and a
bucket takes consecutive gradients until it reaches its size. Effective bandwidth counts each
gradient element read once and each bucket element written once.

Two timings, each against the device copy (1 GiB ``copy_``) timed the same way:
- single call ("us", "%copy"): medians of CUDA-event timings of one call
  (triton.testing.do_bench) over rotating input sets, so buckets larger than L2 come from HBM.
  do_bench zeroes 256 MB before each call, which leaves L2 full of dirty lines that the call
  then writes back: at 32M elements that costs about 2 us (4 points of copy bandwidth), the
  same for one contiguous ``copy_`` (seventeenth session, benchmarks/RESULTS.md).
- steady ("steady us", "steady %copy"): the runtime's launch back to back, 200 calls between two
  CUDA events, rotating over input sets and over as many buckets, so every call reads its
  gradients from HBM and pays for writing its own bucket back, as in training; median of 11.
  From 32M elements up (below, back-to-back calls measure the host's launch rate).
"host us" is the wall time per call of 200 back-to-back launches (host overhead included) and one
synchronize, the median of 11 such windows. "% one copy_" compares with the roofline at the same
size: one contiguous tensor of the bucket's gradient elements copied (and cast) into it with
``Tensor.copy_``. "default us": the block and warps the runtime picks (``default_block``,
``DEFAULT_WARPS``); the other single-call columns are for the best of the configs tried.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import triton

from tritonzero.kernels import DEFAULT_WARPS, BucketPrepPlan, default_block, prep_bucket
from tritonzero.layout import plan_buckets

NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
# Steady timings from this bucket size up (the bandwidth target's range); below it, calls back to
# back are bound by the host's launch rate (about 10 us a call), not by the GPU.
STEADY_FROM = 32_000_000
PAIRS = [(torch.float16, torch.float16), (torch.float16, torch.float32), (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32)]


def transformer_shapes(d: int, layers: int = 24) -> list[int]:
    per_layer = [d, d, 3 * d * d, 3 * d, d * d, d, d, d, 4 * d * d, 4 * d, 4 * d * d, d]
    small = [d, d, 64, 64]  # extra norms / gains: 16 tensors a layer
    return [n for _ in range(layers) for n in per_layer + small]


def width_for(target: int) -> int:
    """Model width whose two layers (about 24 d^2 elements) fill a bucket of ``target``."""
    return max(256, round((target / 24) ** 0.5 / 64) * 64)


def bucket_of(shapes: list[int], target: int, max_tensors: int | None = None) -> list[int]:
    """Consecutive gradient sizes from the end (backward order) until ``target`` elements."""
    out = []
    for n in reversed(shapes):
        if out and (sum(out) + n > target or (max_tensors and len(out) >= max_tensors)):
            break
        out.append(n)
    return out


def make_case(sizes, src, dst, block, sets):
    """(plan, gradient sets, their source tables, one bucket per set)."""
    params = [torch.nn.Parameter(torch.empty(n, device="cuda", dtype=src)) for n in sizes]
    (layout,) = plan_buckets(params, [0] * len(params), sum(sizes) * 2, world_size=2)
    plan = BucketPrepPlan.build(list(layout.numels), list(layout.offsets), layout.padded_numel, torch.device("cuda"), block=block)
    grad_sets = [[torch.randn(n, device="cuda", dtype=src) for n in layout.numels] for _ in range(sets)]
    tables = [plan.source_table(g) for g in grad_sets]
    buckets = [torch.empty(layout.padded_numel, device="cuda", dtype=dst) for _ in range(sets)]
    return plan, grad_sets, tables, buckets


def bench(fn, sets: int) -> float:
    """Median ms of ``fn(i)`` rotating over input sets."""
    it = iter(range(10**9))
    return triton.testing.do_bench(lambda: fn(next(it) % sets), warmup=25, rep=100, return_mode="median")


def steady_us(fn, sets: int, calls: int = 200, windows: int = 11) -> float:
    """GPU time per call of ``fn(i)`` launched back to back, rotating over ``sets``: CUDA events
    around ``calls`` calls; the median over ``windows``."""
    for i in range(20):
        fn(i % sets)
    per_call = []
    for _ in range(windows):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for i in range(calls):
            fn(i % sets)
        e1.record()
        e1.synchronize()
        per_call.append(e0.elapsed_time(e1) * 1e3 / calls)
    return statistics.median(per_call)


def host_us(fn, calls: int = 200, windows: int = 11) -> float:
    """Wall time per call of ``calls`` back-to-back calls and one synchronize, host overhead
    included: the median over ``windows`` such windows. (One window, as before the sixth
    session, moved by 5 us between runs of the same code on one machine.)"""
    fn(0)
    torch.cuda.synchronize()
    per_call = []
    for _ in range(windows):
        t = time.perf_counter()
        for i in range(calls):
            fn(i)
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(per_call)


def copy_bandwidth() -> tuple[float, float]:
    """TB/s of a 1 GiB ``copy_``: (single call as ``bench``, steady as ``steady_us``)."""
    a = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    bs = [torch.empty_like(a) for _ in range(2)]
    single_us = bench(lambda i: bs[i].copy_(a), 2) * 1e3
    return 2 * a.numel() / single_us / 1e6, 2 * a.numel() / steady_us(lambda i: bs[i].copy_(a), 2, calls=20) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--targets", default="1e6,4e6,32e6,100e6", help="bucket sizes (elements)")
    args = parser.parse_args()
    torch.manual_seed(0)
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    copy_tbs, copy_steady_tbs = copy_bandwidth()
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}; "
          f"device copy {copy_tbs:.2f} TB/s (single call), {copy_steady_tbs:.2f} TB/s (steady)")
    configs = [(2048, 2), (1024, 1), (1024, 2), (4096, 2), (1024, 4), (2048, 4), (4096, 4), (8192, 8)]
    targets = [int(float(t)) for t in args.targets.split(",")]
    if args.quick:
        configs, targets = configs[:2], targets[::3]
    rows = []
    for target in targets:
        sizes = bucket_of(transformer_shapes(width_for(target)), target)
        n_el = sum(sizes)
        for src, dst in PAIRS:
            sets = max(2, min(8, int(4e8 // (n_el * 6))))
            nbytes = n_el * (src.itemsize + dst.itemsize)
            best, default_ms, default_steady = None, None, None
            for block, warps in configs:
                plan, grad_sets, tables, buckets = make_case(sizes, src, dst, block, sets)
                ms = bench(lambda i: prep_bucket(plan, tables[i], buckets[0], flag, 0.5, src, num_warps=warps), sets)
                if (block, warps) == (default_block(buckets[0].device), DEFAULT_WARPS):  # what the runtime launches
                    default_ms = ms
                    if target >= STEADY_FROM:
                        default_steady = steady_us(lambda i: prep_bucket(plan, tables[i], buckets[i], flag, 0.5, src), sets)
                if best is None or ms < best[0]:
                    best = (ms, block, warps, plan, tables, buckets[0], grad_sets)
            ms, block, warps, plan, tables, bucket, grad_sets = best
            hus = host_us(lambda i: prep_bucket(plan, tables[i % sets], bucket, flag, 0.5, src, num_warps=warps))
            tmp = torch.empty(n_el, device="cuda", dtype=src)

            def cat_mul(i):
                if src == dst:
                    torch.cat(grad_sets[i], out=bucket[:n_el]).mul_(0.5)
                else:
                    torch.mul(torch.cat(grad_sets[i], out=tmp), 0.5, out=bucket[:n_el])

            def foreach_cat(i):
                torch.cat(torch._foreach_mul(grad_sets[i], 0.5), out=tmp)
                bucket[:n_el].copy_(tmp)

            def copy_loop(i):
                off = 0
                for g in grad_sets[i]:
                    bucket[off : off + g.numel()].copy_(g)
                    off += g.numel()
                bucket[:n_el].mul_(0.5)

            base = {name: bench(fn, sets) for name, fn in [("cat+mul", cat_mul), ("foreach+cat", foreach_cat), ("copy loop", copy_loop)]}
            # The roofline at this size: one contiguous tensor copied (and cast) into the bucket.
            base["one copy_"] = bench(lambda i: bucket[:n_el].copy_(tmp), 1)
            rows.append((target, len(sizes), NAMES[src], NAMES[dst], block, warps, ms, nbytes / ms / 1e9, hus, base, default_ms,
                         default_steady, default_steady and nbytes / default_steady / 1e6))
            del best, plan, tables, bucket, buckets, grad_sets, tmp
            torch.cuda.empty_cache()

    # 1M-element bucket of 20 tensors: the latency target.
    small = bucket_of(transformer_shapes(width_for(10**6)), 10**6, max_tensors=20)
    plan, _, tables, (bucket, _) = make_case(small, torch.float16, torch.float16, None, 2)
    lat_gpu = bench(lambda i: prep_bucket(plan, tables[i], bucket, flag, 0.5, torch.float16), 2) * 1e3
    lat_host = host_us(lambda i: prep_bucket(plan, tables[i % 2], bucket, flag, 0.5, torch.float16))

    print(f"\n{'bucket':>10} {'tens':>4} {'src':>4} {'dst':>4} {'block':>5} {'w':>2} {'us':>8} {'TB/s':>5} {'%copy':>5} "
          f"{'host us':>7} {'x cat+mul':>9} {'x foreach':>9} {'x loop':>7} {'%one copy_':>10} {'default us':>10} "
          f"{'steady us':>9} {'steady %copy':>12}")
    for target, nt, s, d, block, warps, ms, tbs, hus, base, default_ms, steady, steady_tbs in rows:
        print(f"{target:>10.0e} {nt:>4} {s:>4} {d:>4} {block:>5} {warps:>2} {ms * 1e3:>8.1f} {tbs:>5.2f} {100 * tbs / copy_tbs:>5.0f} "
              f"{hus:>7.1f} {base['cat+mul'] / ms:>9.2f} {base['foreach+cat'] / ms:>9.2f} {base['copy loop'] / ms:>7.2f} "
              f"{100 * base['one copy_'] / ms:>10.0f} {'-' if default_ms is None else f'{default_ms * 1e3:.1f}':>10} "
              f"{'-' if steady is None else f'{steady:.1f}':>9} {'-' if steady is None else f'{100 * steady_tbs / copy_steady_tbs:.1f}':>12}")
    print(f"\n1M-element bucket ({sum(small):,} elements, 20 tensors, fp16->fp16): {lat_gpu:.1f} us on the GPU, "
          f"{lat_host:.1f} us per call with host overhead; median of cat+mul timings in TB/s: "
          f"{statistics.median(r[7] * r[6] / r[9]['cat+mul'] for r in rows):.2f}")


if __name__ == "__main__":
    main()
