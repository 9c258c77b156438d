"""Eighteenth session: which compute-stream kernels a system adds or slows, against another.

Profiles ``--steps`` fwd+bwd passes of each system of ``split_s18.py`` (host ``--lead-ms`` ahead)
and prints, for rank 0, the compute stream's kernels summed by name (median over steps): the
names whose time or count differs most between the first and each other system, with the
compute stream's idle gaps (total, and those over 5 us by the kernel that ends them).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node 2 benchmarks/results/kernels_s18.py --systems floor-hooks,keep-skel
"""
import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_overlap as bo  # noqa: E402
import profile_gpu  # noqa: E402
import split_s18 as sp  # noqa: E402


def by_name(path: str) -> dict[str, tuple[float, int]]:
    """Compute-stream kernel time (ms) and count by name, the sleep and the barrier left out."""
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
    sleep = [e for e in events if "spin" in e["name"].lower() or "sleep" in e["name"].lower()]
    compute = sleep[0]["args"]["stream"] if sleep else collections.Counter(e["args"]["stream"] for e in events).most_common(1)[0][0]
    out: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e["args"]["stream"] == compute and e not in sleep and "barrier" not in e["name"].lower():
            out[e["name"][:90]][0] += e["dur"] / 1e3
            out[e["name"][:90]][1] += 1
    out["(other streams)"] = [sum(e["dur"] for e in events if e["args"]["stream"] != compute) / 1e3,
                              sum(e["args"]["stream"] != compute for e in events)]
    # Idle time on the compute stream between the sleep's end and its last kernel (barrier aside),
    # filed under the kernel that ends each gap ("(gap before) NAME").
    ordered = sorted((e for e in events if e["args"]["stream"] == compute and "barrier" not in e["name"].lower()),
                     key=lambda e: e["ts"])
    for prev, nxt in zip(ordered, ordered[1:]):
        gap = nxt["ts"] - (prev["ts"] + prev["dur"])
        if gap > 0:
            out["(gaps)"][0] += gap / 1e3
            out["(gaps)"][1] += 1
            if gap > 5:
                out[f"(gap before) {nxt['name'][:77]}"][0] += gap / 1e3
                out[f"(gap before) {nxt['name'][:77]}"][1] += 1
    return {k: tuple(v) for k, v in out.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--systems", default="floor-hooks,keep-skel")
    p.add_argument("--bucket", type=float, default=1e6)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--lead-ms", type=float, default=10.0)
    args = p.parse_args()
    rank, x = bo.join_ranks()
    lead = bo.sleep_cycles(args.lead_ms)
    keep = dict(reduce_transport="copy_engine", keep_grads_until_step=True)
    builders = {"floor": sp.floor(), "floor-hooks": sp.floor(hooks=True), "floor-sync": sp.floor(with_sync=True),
                "tz-ce-keep": sp.tz(**keep), "keep-skel": sp.tz(copying_ranks=(), **keep), "tz-fused": sp.tz()}
    tables = {}
    for name in args.systems.split(","):
        model = bo.fresh_model()
        fwd_bwd, step = builders[name](model, args)
        path = os.path.join(tempfile.gettempdir(), f"kernels_{rank}.json")
        per_step = profile_gpu.profiled_passes(fwd_bwd, step, x, args, lead, by_name, path)
        names = set().union(*per_step)
        tables[name] = {k: (statistics.median(s.get(k, (0.0, 0))[0] for s in per_step),
                            statistics.median(s.get(k, (0.0, 0))[1] for s in per_step)) for k in names}
        del model, fwd_bwd, step
        sp.MARKS.clear()
        dist.barrier()
    if rank == 0:
        base_name, *others = list(tables)
        base = tables[base_name]
        for name in others:
            t = tables[name]
            total = lambda tb: sum(v[0] for k, v in tb.items() if not k.startswith("("))  # noqa: E731
            print(f"\n{name} against {base_name}: compute-stream kernels {total(t):.2f} against {total(base):.2f} ms")
            rows = sorted(set(t) | set(base), key=lambda k: -abs(t.get(k, (0, 0))[0] - base.get(k, (0, 0))[0]))
            print(f"{'kernel':<90} {'ms':>7} {'base ms':>8} {'n':>5} {'base n':>6}")
            for k in rows[:24]:
                a, b = t.get(k, (0.0, 0)), base.get(k, (0.0, 0))
                print(f"{k:<90} {a[0]:>7.3f} {b[0]:>8.3f} {a[1]:>5.0f} {b[1]:>6.0f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
