"""Where fwd+bwd+sync time goes on the GPU: kernel time per stream and kind, one system at a time.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node 2 benchmarks/profile_gpu.py --systems floor,tz,ddp --bucket 1e8

For each system (the models and builders of bench_overlap.py) it profiles ``--steps`` fwd+bwd+sync
passes after a warm-up with ``torch.profiler`` (the optimizer step runs outside it) and prints
rank 0's medians over those passes: the span from the first to the last kernel or copy, the
compute stream's busy and idle time, and time by kind (GEMM, attention, NCCL, prep, copies by
copy engine, other). Comparing a system's GEMM time with the floor's shows how much its
communication slows compute down; idle time on the compute stream shows waits and host-bound
launches.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile

import torch
import torch.distributed as dist

from bench_overlap import build_ddp, build_floor, build_tz, fresh_model, join_ranks, sleep_cycles

KINDS = (("nccl", "nccl"), ("barrier", "barrier"), ("prep", "prep_bucket"), ("copy", "memcpy"), ("gemm", "gemm"), ("gemm", "nvjet"), ("gemm", "cutlass"),
         ("gemm", "sm90_xmma"), ("attention", "flash"), ("attention", "fmha"), ("attention", "attention"))


def kind_of(name: str) -> str:
    low = name.lower()
    return next((kind for kind, key in KINDS if key in low), "other")


def union_ms(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(spans):
        if e > end:
            total += e - max(s, end)
            end = e
    return total / 1e3


def analyse(trace_path: str) -> dict:
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]
    events = [e for e in events if "spin_kernel" not in e["name"]]  # --lead-ms's sleep
    per_stream = collections.Counter(e["args"]["stream"] for e in events if kind_of(e["name"]) == "gemm")
    compute = per_stream.most_common(1)[0][0]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events]
    by_kind = collections.defaultdict(float)
    for e in events:
        by_kind[kind_of(e["name"])] += e["dur"] / 1e3
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["args"]["stream"] == compute]
    span_ms = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e3
    busy = union_ms(comp)
    # "tail": from the compute stream's last kernel (a barrier aside) to the last of any stream.
    last_work = max(e["ts"] + e["dur"] for e in events if e["args"]["stream"] == compute and kind_of(e["name"]) != "barrier")
    return {"span": span_ms, "compute busy": busy,
            "compute idle": (max(e for _, e in comp) - min(s for s, _ in comp)) / 1e3 - busy,
            "tail": (max(e for _, e in spans) - last_work) / 1e3, **by_kind}


def profiled_passes(fwd_bwd, step, x, args, lead_cycles: int, analyse_trace, trace_path: str) -> list:
    """``args.warmup`` steps, then ``args.steps`` fwd+bwd+sync passes under ``torch.profiler``
    (CUDA activity), both ranks starting each together and the host ``lead_cycles`` of GPU
    sleep ahead; the optimizer step runs between passes, outside the profile. Each pass's
    trace goes to ``trace_path`` (the last one is kept); returns ``analyse_trace(trace_path)`` of each."""
    for _ in range(args.warmup):
        fwd_bwd(x)
        step()
    results = []
    for _ in range(args.steps):
        dist.barrier()  # both ranks start the profiled pass together
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            if lead_cycles:
                torch.cuda._sleep(lead_cycles)
            fwd_bwd(x)
            torch.cuda.synchronize()
        prof.export_chrome_trace(trace_path)
        results.append(analyse_trace(trace_path))
        step()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", default="floor,tz,ddp")
    parser.add_argument("--bucket", type=float, default=1e8)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lead-ms", type=float, default=0.0,
                        help="let the host run this far ahead (a GPU sleep before each profiled pass, left out of the analysis)")
    parser.add_argument("--trace-dir", default=None, help="keep each system's last profiled pass here as a Chrome trace")
    args = parser.parse_args()
    rank, x = join_ranks()
    lead_cycles = sleep_cycles(args.lead_ms)
    builders = {"floor": build_floor, "ddp": lambda m, a: build_ddp(m, a, args.bucket),
                "tz": lambda m, a: build_tz(m, a, args.bucket),
                "tz-lowprio": lambda m, a: build_tz(m, a, args.bucket, high_priority_comm=False),
                "tz-ce": lambda m, a: build_tz(m, a, args.bucket, fused=True, reduce_transport="copy_engine"),
                "tz-ce-keep": lambda m, a: build_tz(m, a, args.bucket, fused=True, reduce_transport="copy_engine",
                                                    keep_grads_until_step=True)}
    rows = {}
    for name in args.systems.split(","):
        model = fresh_model()
        fwd_bwd, step = builders[name](model, args)
        path = os.path.join(args.trace_dir or tempfile.gettempdir(), f"profile_{name}_rank{rank}.json")
        per_step = profiled_passes(fwd_bwd, step, x, args, lead_cycles, analyse, path)
        rows[name] = {k: statistics.median(r.get(k, 0.0) for r in per_step) for k in per_step[0]}
        del model, fwd_bwd, step
        dist.barrier()
    if rank == 0:
        cols = ["span", "compute busy", "compute idle", "gemm", "attention", "other", "nccl", "prep", "copy", "barrier", "tail"]
        print(f"bucket {args.bucket:.0e}, ms per fwd+bwd+sync (kernel sums; streams overlap)")
        print(f"{'system':<12}" + "".join(f"{c:>14}" for c in cols))
        for name, r in rows.items():
            print(f"{name:<12}" + "".join(f"{r.get(c, 0.0):>14.2f}" for c in cols))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
