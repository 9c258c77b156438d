"""Seventeenth session: does the single-shot timing's L2 flush (do_bench zeroes 256 MB before
each call, leaving L2 full of dirty lines) charge the prep kernel for writing them back?

Per bucket size and dtype pair, the runtime's launch (default block and warps) and one contiguous
``copy_`` of the same elements, timed three ways:
  zero-flush  triton.testing.do_bench, as bench_prep.py's ``bench`` (256 MB zeroed before each call)
  read-flush  the same single call after a 256 MB *read* (L2 left clean)
  steady      bench_prep.py's ``steady_us``: back-to-back calls rotating over input sets *and*
              buckets (each set larger than L2 at 32M and up), CUDA events around 200 calls / 200;
              median of 11 windows
and the device copy (1 GiB copy_) the same three ways. Run from the repository root:
    python3 benchmarks/results/prep_steady_s17.py
"""
import statistics
import sys

import torch
import triton

sys.path.insert(0, "benchmarks")
from bench_prep import bench, bucket_of, make_case, steady_us, transformer_shapes, width_for  # noqa: E402
from tritonzero.kernels import prep_bucket  # noqa: E402

FLUSH = torch.empty(2**26, dtype=torch.int32, device="cuda")  # 256 MB, as triton's
SINK = torch.empty((), dtype=torch.int64, device="cuda")


def read_flush(fn, sets, reps=100):
    times = []
    for i in range(reps + 10):
        torch.sum(FLUSH, 0, out=SINK)  # reads 256 MB: L2 holds clean lines only
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn(i % sets)
        e1.record()
        e1.synchronize()
        if i >= 10:
            times.append(e0.elapsed_time(e1) * 1e3)
    return statistics.median(times)


WAYS = [("zero-flush", lambda fn, sets: bench(fn, sets) * 1e3), ("read-flush", read_flush), ("steady", steady_us)]


def main():
    a = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    bs = [torch.empty_like(a) for _ in range(2)]
    copy_tbs = {w: 2 * a.numel() / f(lambda i: bs[i].copy_(a), 2) / 1e6 for w, f in WAYS}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print("device copy (1 GiB) TB/s: " + ", ".join(f"{w} {v:.2f}" for w, v in copy_tbs.items()))
    del a, bs
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    rows = []
    for target in (32e6, 100e6):
        sizes = bucket_of(transformer_shapes(width_for(int(target))), int(target))
        n = sum(sizes)
        for src, dst in [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)]:
            sets = 4
            plan, grads, tables, buckets = make_case(sizes, src, dst, None, sets)  # a bucket per set
            srcs = [torch.randn(n, device="cuda", dtype=src) for _ in range(sets)]
            nbytes = n * (src.itemsize + dst.itemsize)
            kern = lambda i: prep_bucket(plan, tables[i], buckets[i], flag, 0.5, src)  # noqa: E731
            copy = lambda i: buckets[i][:n].copy_(srcs[i])  # noqa: E731
            for name, fn in [("prep", kern), ("copy_", copy)]:
                for w, f in WAYS:
                    us = f(fn, sets)
                    rows.append((f"{target:.0e}", f"{str(src)[6:]}->{str(dst)[6:]}", name, w, us,
                                 nbytes / us / 1e6, 100 * nbytes / us / 1e6 / copy_tbs[w], 100 * nbytes / us / 1e6 / copy_tbs["zero-flush"]))
            del plan, grads, tables, buckets, srcs
            torch.cuda.empty_cache()
    print(f"\n{'bucket':>6} {'pair':>18} {'what':>5} {'timing':>10} {'us':>7} {'TB/s':>5} {'% copy same way':>15} {'% copy zero-flush':>17}")
    for r in rows:
        print(f"{r[0]:>6} {r[1]:>18} {r[2]:>5} {r[3]:>10} {r[4]:>7.1f} {r[5]:>5.2f} {r[6]:>15.1f} {r[7]:>17.1f}")


if __name__ == "__main__":
    main()
