"""Host time spent in tritonzero's backward hooks, per bucket launch (2 GPUs, torchrun).

    torchrun --nproc_per_node 2 benchmarks/profile_host.py --bucket 1e6

Wraps backward's hook, the prep launcher, the reduce-scatter call, its ``Work.wait`` and a
bucket's whole issue (all but the hook on the comm thread) with wall and CPU clocks, and
compares the host time of backward with its GPU time: when the host is slower, backward is
launch-bound. ``--cprofile`` prints a cProfile of every thread instead.
"""

import argparse
import collections
import cProfile
import os
import pstats
import time

import torch
import torch.distributed as dist

import tritonzero.bucket as tzb
import tritonzero.grad_sync as tzg
from bench_overlap import fresh_model, loss_of
from tritonzero import ZeroOptimizer

COST = collections.defaultdict(float)  # wall seconds
CPU = collections.defaultdict(float)  # this thread's CPU seconds: wall minus CPU is time spent waiting (GIL, locks)
CALLS = collections.Counter()


def timed(name, fn):
    def wrapper(*a, **k):
        t, c = time.perf_counter(), time.thread_time()
        out = fn(*a, **k)
        COST[name] += time.perf_counter() - t
        CPU[name] += time.thread_time() - c
        CALLS[name] += 1
        return out

    return wrapper


class TimedWork:
    """A collective's Work whose ``wait`` (the comm stream waiting on NCCL's) is timed."""

    def __init__(self, work):
        self._work = work

    def wait(self):
        return timed("Work.wait", self._work.wait)()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bucket", type=float, default=1e6)
    p.add_argument("--cprofile", action="store_true", help="print a cProfile of every thread instead of the wall clocks")
    args = p.parse_args()
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = fresh_model()
    x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)
    # cProfile (Python 3.12: sys.monitoring) sees every thread: backward's hooks, the comm thread.
    prof = cProfile.Profile() if args.cprofile else None
    if not args.cprofile:
        tzg.GradSync._on_grad = timed("hook (backward thread)", tzg.GradSync._on_grad)
        tzb.prep_bucket = timed("prep launch", tzb.prep_bucket)
        real_rs = tzb.reduce_scatter
        tzb.reduce_scatter = timed("reduce_scatter call", lambda *a: TimedWork(real_rs(*a)))
        tzb.Bucket.issue = timed("Bucket.issue total", tzb.Bucket.issue)  # on the comm thread
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=1e-5), bucket_size=int(args.bucket))
    host, gpu = [], []
    for i in range(8):
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        e0.record()
        opt.backward(loss_of(model(x)))
        host.append((time.perf_counter() - t) * 1e3)
        opt.finish_grad_sync()
        e1.record()
        opt.step()
        opt.zero_grad()
        torch.cuda.synchronize()
        gpu.append(e0.elapsed_time(e1))
        if i == 2:
            if prof is not None:
                prof.enable()
            COST.clear()
            CPU.clear()
            CALLS.clear()
    if dist.get_rank() == 0:
        print(f"bucket {args.bucket:.0e}: {len(opt.buckets)} buckets; fwd+bwd host {sorted(host)[4]:.1f} ms, "
              f"fwd+bwd+sync GPU {sorted(gpu)[4]:.1f} ms")
        for name in COST:
            print(f"  {name:<22} {COST[name] / CALLS[name] * 1e6:7.1f} us per call ({CPU[name] / CALLS[name] * 1e6:5.1f} us CPU), "
                  f"{CALLS[name] // 5} calls per step")
        if prof is not None:
            prof.disable()
            print("\nevery thread, 5 steps (profiled, so slower than above):")
            pstats.Stats(prof).sort_stats("tottime").print_stats(28)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
