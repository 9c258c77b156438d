"""Twenty-first session: what makes tritonzero's reduce-scatters slower than bench_overlap's
"RS alone" over NCCL's socket transport, with no compute beside them (socket_split_s21.py).

Part 1, plain torch (``bench_overlap.collectives_alone``): reduce-scatter, then all-gather, the
model's element count (fp16) back to back in chunks of 1e6 / 4e6 / 25e6 elements, with SUM or
with the pre-multiplied sum tritonzero asks for (x 1 / world size), on the default process group
or on a second one with NCCL's high-priority stream.
Then plain reduce-scatters of tritonzero's bucket sizes (1e6, 25e6), SUM on the default group.
Part 2, tritonzero with the no-compute backward of socket_split_s21.py, with and without
``high_priority_comm``, and once with no back-pressure (``max_buckets_in_flight`` above the
bucket count).

    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo \\
        torchrun --nproc_per_node 2 benchmarks/results/socket_rs_s21.py
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_overlap as bo  # noqa: E402
from socket_split_s21 import build_comm_only  # noqa: E402
from tritonzero.layout import plan_buckets  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rank, x = bo.join_ranks()
    high_priority = dist.ProcessGroupNCCL.Options()
    high_priority.is_high_priority_stream = True
    high = dist.new_group(list(range(dist.get_world_size())), backend="nccl", pg_options=high_priority)
    args.warmup, args.steps = 2, args.reps
    lines = []
    for group_name, group in (("default group", None), ("high-priority group", high)):
        for op_name, op in (("sum", dist.ReduceOp.SUM), ("premul 1/w", dist._make_nccl_premul_sum(1 / dist.get_world_size()))):
            for chunk in (10**6, 4 * 10**6, 25 * 10**6):
                r = bo.collectives_alone(x, args, chunk, op, group)
                lines.append(f"RS {chunk:<8.3g} {op_name:<10} {group_name:<20} {r['fwd_bwd_sync_ms']:8.1f} ms"
                             f"   RS + AG {r['step_ms']:8.1f} ms")
    # Plain reduce-scatters of tritonzero's own bucket sizes (its layout for 2 ranks), default group, SUM.
    params = list(bo.fresh_model().parameters())
    for bucket in (1e6, 25e6):
        sizes = [b.padded_numel for b in plan_buckets(params, [0] * len(params), int(bucket), dist.get_world_size())]
        r = bo.collectives_alone(x, args, sizes)
        name = f"RS of tz's {len(sizes)} bucket sizes at {bucket:.3g}"
        lines.append(f"{name:<52} {r['fwd_bwd_sync_ms']:8.1f} ms"
                     f"   RS + AG {r['step_ms']:8.1f} ms")
    args.lead_cycles = args.rest_cycles = 0
    variants = [(b, {"high_priority_comm": hp}) for b in (1e6, 25e6) for hp in (True, False)]
    variants.append((1e6, {"max_buckets_in_flight": 10**4}))
    for bucket, options in variants:
        def build(m, a, b=bucket, o=options):
            return build_comm_only(m, a, b, **o)
        name = f"tz comm only {bucket:.3g} " + " ".join(f"{k}={v}" for k, v in options.items())
        lines.append(f"{name:<52} {bo.run(name, build, x, args)['fwd_bwd_sync_ms']:8.1f} ms")
    if rank == 0:
        print("\n".join(lines))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
