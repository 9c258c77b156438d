"""One-off (session 14): what each system holds between steps, exactly, by allocation site (rank 0).

After three steps, every live allocator block made since the system was built is grouped by the
first stack frame in tritonzero, DeepSpeed, torch.optim or the benchmark, with exact bytes
(block sizes: what ``memory_allocated`` counts). Then one more step's peak above the same start.
Run from the repository root under torchrun (2 ranks)."""
import collections
import gc
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, "benchmarks")
import bench_overlap as B  # noqa: E402

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)
KEYS = ("tritonzero/", "deepspeed/", "torch/optim/", "bench_overlap")


def site(frames):
    for f in frames:
        if any(k in f["filename"] for k in KEYS):
            return f"{f['filename'].split('/')[-1]}:{f['line']}:{f['name']}"
    return "(other)"


def live_blocks():
    return {b["address"]: b for seg in torch.cuda.memory._snapshot()["segments"] for b in seg["blocks"]
            if b["state"] == "active_allocated"}


for name, builder in [("tz-fused 1e6", lambda m: B.build_tz(m, None, 1e6, fused=True)),
                      ("deepspeed 1e6", lambda m: B.build_deepspeed(m, None, 1e6)),
                      ("tz-fused 25e6", lambda m: B.build_tz(m, None, 25e6, fused=True))]:
    gc.collect()
    torch.cuda.empty_cache()
    existing = set(live_blocks())
    before = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=500000)
    model = B.fresh_model()
    fwd_bwd, step = builder(model)
    for _ in range(3):
        fwd_bwd(x)
        step()
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before
    groups = collections.defaultdict(lambda: [0, 0])
    for addr, b in live_blocks().items():
        if addr in existing:
            continue
        g = groups[site(b.get("frames", []))]
        g[0] += b["size"]
        g[1] += 1
    torch.cuda.reset_peak_memory_stats()
    fwd_bwd(x)
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    torch.cuda.memory._record_memory_history(enabled=None)
    if rank == 0:
        print(f"\n== {name}: held between steps {held} bytes ({held / 2**20:.4f} MiB); next step's peak above start {peak} bytes "
              f"({peak / 2**30:.6f} GiB)")
        for k, (size, n) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
            print(f"   {size:>12} B  x{n:<4} {k}")
        print(f"   {sum(s for s, _ in groups.values()):>12} B  total of the blocks above", flush=True)
    del model, fwd_bwd, step
dist.destroy_process_group()
