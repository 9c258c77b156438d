"""Host time spent in tritonzero's backward hooks, per bucket launch (2 GPUs, torchrun).

    torchrun --nproc_per_node 2 benchmarks/profile_host.py --bucket 1e6

Wraps the prep launcher, the reduce-scatter call and a bucket's whole issue (all on the comm
thread) with wall clocks and compares the host time of backward with its GPU time: when the host
is slower, backward is launch-bound. (The figures in RESULTS.md were taken before the comm thread
existed, wrapping the then single ``Bucket.launch``.)
"""

import argparse
import collections
import os
import time

import torch
import torch.distributed as dist

import tritonzero.bucket as tzb
from bench_overlap import fresh_model, loss_of
from tritonzero import ZeroOptimizer

COST = collections.defaultdict(float)
CALLS = collections.Counter()


def timed(name, fn):
    def wrapper(*a, **k):
        t = time.perf_counter()
        out = fn(*a, **k)
        COST[name] += time.perf_counter() - t
        CALLS[name] += 1
        return out

    return wrapper


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bucket", type=float, default=1e6)
    args = p.parse_args()
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = fresh_model()
    x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=1e-5), bucket_size=int(args.bucket))
    tzb.prep_bucket = timed("prep launch", tzb.prep_bucket)
    tzb.reduce_scatter = timed("reduce_scatter call", tzb.reduce_scatter)
    tzb.Bucket.issue = timed("Bucket.issue total", tzb.Bucket.issue)  # on the comm thread
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
            COST.clear()
            CALLS.clear()
    if dist.get_rank() == 0:
        print(f"bucket {args.bucket:.0e}: {len(opt.buckets)} buckets; fwd+bwd host {sorted(host)[4]:.1f} ms, "
              f"fwd+bwd+sync GPU {sorted(gpu)[4]:.1f} ms")
        for name in COST:
            print(f"  {name:<22} {COST[name] / CALLS[name] * 1e6:7.1f} us per call, {CALLS[name] // 5} calls per step")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
