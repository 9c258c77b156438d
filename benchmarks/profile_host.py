"""Host time spent in tritonzero's backward hooks, per bucket launch (2 GPUs, torchrun).

    torchrun --nproc_per_node 2 benchmarks/profile_host.py --bucket 1e6 [--transport copy_engine]

Wraps backward's hook, the prep launcher, the reduce-scatter call, its ``Work.wait`` (or the
copy-engine transport's pushes) and a bucket's whole issue (all but the hook on the comm
thread) with wall and CPU clocks, and
compares the host time of backward with its GPU time: when the host is slower, backward is
launch-bound. ``--cprofile`` prints a cProfile of every thread instead.
"""

import argparse
import collections
import cProfile
import pstats
import time

import torch
import torch.distributed as dist

import tritonzero.bucket as tzb
import tritonzero.copy_engine as tzc
import tritonzero.grad_sync as tzg
from bench_overlap import fresh_model, join_ranks, loss_of
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


def host_and_gpu(backward, finish, step, warmed=lambda: None) -> tuple[float, float]:
    """Medians over 5 steps after 3 warm-up steps (``warmed`` runs after them), ms: the host
    time of ``backward`` (forward included) and the GPU time of it and ``finish``."""
    host, gpu = [], []
    for i in range(8):
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        e0.record()
        backward()
        elapsed = (time.perf_counter() - t) * 1e3
        finish()
        e1.record()
        step()
        torch.cuda.synchronize()
        if i >= 3:
            host.append(elapsed)
            gpu.append(e0.elapsed_time(e1))
        if i == 2:
            warmed()
    return sorted(host)[2], sorted(gpu)[2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bucket", type=float, default=1e6)
    p.add_argument("--transport", default="collective", choices=tzc.TRANSPORTS)
    p.add_argument("--cprofile", action="store_true", help="print a cProfile of every thread instead of the wall clocks")
    args = p.parse_args()
    _, x = join_ranks()
    model = fresh_model()
    floor_host, floor_gpu = host_and_gpu(lambda: loss_of(model(x)).backward(), lambda: None,
                                         lambda: model.zero_grad(set_to_none=True))
    # cProfile (Python 3.12: sys.monitoring) sees every thread: backward's hooks, the comm thread.
    prof = cProfile.Profile() if args.cprofile else None
    if not args.cprofile:
        tzg.GradSync._on_grad = timed("hook (backward thread)", tzg.GradSync._on_grad)
        tzb.prep_bucket = timed("prep launch", tzb.prep_bucket)
        real_rs = tzb.reduce_scatter
        tzb.reduce_scatter = timed("reduce_scatter call", lambda *a, **k: TimedWork(real_rs(*a, **k)))
        tzb.Bucket.issue = timed("Bucket.issue total", tzb.Bucket.issue)  # on the comm thread
        tzc.CopyEngineReduce.push = timed("copy-engine push", tzc.CopyEngineReduce.push)
        tzc.CopyEngineReduce.push_grads = timed("copy-engine push_grads", tzc.CopyEngineReduce.push_grads)
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=1e-5), bucket_size=int(args.bucket),
                        reduce_transport=args.transport)

    def reset_counters():
        if prof is not None:
            prof.enable()
        COST.clear()
        CPU.clear()
        CALLS.clear()

    host, gpu = host_and_gpu(lambda: opt.backward(loss_of(model(x))), opt.finish_grad_sync,
                             lambda: (opt.step(), opt.zero_grad()), reset_counters)
    if dist.get_rank() == 0:
        print(f"no sync (plain backward, this model): fwd+bwd host {floor_host:.1f} ms, GPU {floor_gpu:.1f} ms")
        print(f"bucket {args.bucket:.0e}, {args.transport}: {len(opt.buckets)} buckets; fwd+bwd host {host:.1f} ms, "
              f"fwd+bwd+sync GPU {gpu:.1f} ms")
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
