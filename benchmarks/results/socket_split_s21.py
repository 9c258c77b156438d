"""Twenty-first session: why tritonzero's reduce-scatters over NCCL's socket transport take longer
beside backward than alone. Per bucket size, three rows (bench_overlap.py's harness and model):

- ``comm only``: tritonzero with a backward that does no compute (the loss reads one element of
  every parameter, so every gradient is ready at once): its buckets' prep and reduce-scatters
  back to back, nothing beside them;
- ``tz-fused``: the real fwd+bwd, as in the overlap table;
- and once, ``RS + AG alone``: reduce-scatters of 25e6 elements (bench_overlap's comm floor).

    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo \\
        torchrun --nproc_per_node 2 benchmarks/results/socket_split_s21.py --buckets 1e6,4e6,25e6
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import bench_overlap as bo  # noqa: E402


def no_compute_loss(model, x):
    """A loss that reads one element of every parameter: backward does no compute and every
    gradient is ready at once."""
    return torch.stack([p.view(-1)[0].float() for p in model.parameters()]).sum() * 0.0


def build_comm_only(model, args, bucket, **options):
    return bo.build_tz(model, args, bucket, fused=True, loss=no_compute_loss, **options)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--buckets", default="1e6,4e6,25e6")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    args.lead_cycles = args.rest_cycles = 0
    rank, x = bo.join_ranks()
    rows = [bo.collectives_alone(x, args)]
    for b in (float(s) for s in args.buckets.split(",")):
        rows.append(bo.run(f"comm only {b:.3g}", lambda m, a, b=b: build_comm_only(m, a, b), x, args))
        rows.append(bo.run(f"tz-fused {b:.3g}", lambda m, a, b=b: bo.build_tz(m, a, b, fused=True), x, args))
    if rank == 0:
        rs = rows[0]["fwd_bwd_sync_ms"]
        print(f"{'system':<22} {'fwd+bwd+sync ms':>15} {'x RS alone':>10} {'step ms':>8}")
        for r in rows:
            print(f"{r['system']:<22} {r['fwd_bwd_sync_ms']:>15.1f} {r['fwd_bwd_sync_ms'] / rs:>10.3f} {r['step_ms']:>8.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
