"""Seventeenth session: what the synchronous floor's rendezvous costs, split.

bench_overlap.py's floor with a one-element all-reduce after backward only, after the step only,
or both (``floor-sync``); and for each, when each rank's host starts the step (CLOCK_MONOTONIC,
one clock for both processes of the machine). From the no-sync floor's own steps it also predicts
what a rendezvous at backward's end would cost if each rank kept its start and its duration:
median over steps of max(start_q + duration_q) - (start_0 + duration_0).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node 2 benchmarks/results/rendezvous_s17.py [--steps 50] [--lead-ms 0]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_overlap as bo  # noqa: E402

STARTS: list[float] = []


def timed_starts(after_bwd: bool, after_step: bool):
    def build(model, args):
        fwd_bwd, step = bo.build_floor(model, args)
        token = torch.zeros(1, device="cuda")

        def fb(x):
            STARTS.append(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3)
            fwd_bwd(x)
            if after_bwd:
                dist.all_reduce(token)

        def st():
            step()
            if after_step:
                dist.all_reduce(token)

        return fb, st
    return build


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lead-ms", type=float, default=0.0)
    args = p.parse_args()
    rank, x = bo.join_ranks()
    args.lead_cycles = bo.sleep_cycles(args.lead_ms)
    args.rest_cycles = 0  # bench_overlap's --rest-ms came later (eighteenth session)
    systems = [("floor", False, False), ("sync after bwd", True, False), ("sync after step", False, True),
               ("floor-sync (both)", True, True), ("floor again", False, False)]
    if rank == 0:
        print(f"{'system':<20} {'fwd+bwd+sync ms r0/r1':>22} {'x floor':>7} {'step ms':>8} {'start r1-r0 ms med [p10,p90]':>30} "
              f"{'predicted wait ms':>17} {'min step r0':>11}")
    floor = None
    for name, ab, ast in systems:
        STARTS.clear()
        row = bo.run(name, timed_starts(ab, ast), x, args)
        starts = STARTS[args.warmup : args.warmup + args.steps]
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, starts)
        dist.barrier()
        if rank == 0:
            per = row["fwd_bwd_sync_steps_per_rank"]
            skew = sorted(b - a for a, b in zip(every[0], every[1]))
            n = len(skew)
            ends = [max(s + d for s, d in zip(ss, ds)) - (every[0][i] + per[0][i])
                    for i, (ss, ds) in enumerate(zip(zip(*every), zip(*per)))]
            if floor is None:
                floor = row["fwd_bwd_sync_ms"]
            print(f"{name:<20} {statistics.median(per[0]):>10.2f}/{statistics.median(per[1]):<11.2f} "
                  f"{row['fwd_bwd_sync_ms'] / floor:>7.3f} {row['step_ms']:>8.2f} "
                  f"{statistics.median(skew):>12.3f} [{skew[n // 10]:.3f},{skew[9 * n // 10]:.3f}]     "
                  f"{statistics.median(ends):>17.3f} {min(per[0]):>11.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
