"""Twenty-first session: what makes tritonzero's reduce-scatters slower than bench_overlap's
"RS alone" over NCCL's socket transport, with no compute beside them (socket_split_s21.py).

Part 1, plain torch: reduce-scatter the model's element count (fp16) back to back in chunks of
1e6 / 4e6 / 25e6 elements, with SUM or with the pre-multiplied sum tritonzero asks for (x 1/2),
on the default process group or on a second one with NCCL's high-priority stream.
Part 2, tritonzero with the no-compute backward of socket_split_s21.py, with and without
``high_priority_comm``.

    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo \\
        torchrun --nproc_per_node 2 benchmarks/results/socket_rs_s21.py
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_overlap as bo  # noqa: E402
from socket_split_s21 import build_comm_only  # noqa: E402
from tritonzero.collectives import reduce_scatter  # noqa: E402


def time_rs(n: int, chunk: int, average: bool, group: dist.ProcessGroup, reps: int) -> float:
    """Median ms to reduce-scatter ``n`` fp16 elements in ``chunk``-element calls (tritonzero's
    call: SUM, or with ``average`` the pre-multiplied sum), the current stream waiting on each."""
    world = dist.get_world_size()
    chunk = chunk // world * world
    full = torch.randn(n // chunk * chunk, device="cuda", dtype=torch.float16).view(-1, chunk)
    shard = torch.empty(full.shape[0], chunk // world, device="cuda", dtype=torch.float16)
    times = []
    for i in range(reps + 2):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for row, out in zip(full, shard):
            reduce_scatter(out, row, group, average).wait()
        e1.record()
        e1.synchronize()
        if i >= 2:
            times.append(e0.elapsed_time(e1) * n / full.numel())
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rank, x = bo.join_ranks()
    n = sum(p.numel() for p in bo.fresh_model().parameters())
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = True
    high = dist.new_group(list(range(dist.get_world_size())), backend="nccl", pg_options=options)
    world = dist.group.WORLD
    lines = []
    for group_name, group in (("default group", world), ("high-priority group", high)):
        for op_name, average in (("sum", False), ("premul 1/2", True)):
            for chunk in (10**6, 4 * 10**6, 25 * 10**6):
                ms = time_rs(n, chunk, average, group, args.reps)
                lines.append(f"RS {chunk:.0e} {op_name:<10} {group_name:<20} {ms:8.1f} ms")
    args.warmup, args.steps, args.lead_cycles, args.rest_cycles = 3, 8, 0, 0
    lines.append(f"{'bench_overlap RS alone (25e6, dist.reduce_scatter_tensor)':<52} "
                 f"{bo.collectives_alone(x, args)['fwd_bwd_sync_ms']:8.1f} ms")
    for bucket in (1e6, 25e6):
        for hp in (True, False):
            def build(m, a, b=bucket, hp=hp):
                return build_comm_only(m, a, b, high_priority_comm=hp)
            r = bo.run(f"tz comm only {bucket:.0e} high_priority_comm={hp}", build, x, args)
            lines.append(f"{r['system']:<52} {r['fwd_bwd_sync_ms']:8.1f} ms")
    if rank == 0:
        print("\n".join(lines))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
