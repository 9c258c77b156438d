"""One-off (session 11): launch configs A/B on the same gradients and bucket, interleaved rounds."""
import statistics, sys, torch
sys.path.insert(0, "benchmarks")
from bench_prep import NAMES, bucket_of, transformer_shapes, width_for, bench, copy_bandwidth
from tritonzero.kernels import BucketPrepPlan, prep_bucket
from tritonzero.layout import plan_buckets
copy = copy_bandwidth()
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
configs = [(2048, 2), (4096, 4), (1024, 1)]
for target in (32_000_000, 100_000_000):
    sizes = bucket_of(transformer_shapes(width_for(target)), target)
    n = sum(sizes)
    for src, dst in [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)]:
        params = [torch.nn.Parameter(torch.empty(k, device="cuda", dtype=src)) for k in sizes]
        (layout,) = plan_buckets(params, [0] * len(params), n * 2, world_size=2)
        sets = max(2, min(8, int(4e8 // (n * 6))))
        grads = [[torch.randn(k, device="cuda", dtype=src) for k in layout.numels] for _ in range(sets)]
        bucket = torch.empty(layout.padded_numel, device="cuda", dtype=dst)
        plans = {c: BucketPrepPlan.build(list(layout.numels), list(layout.offsets), layout.padded_numel, torch.device("cuda"), block=c[0]) for c in configs}
        tables = {c: [plans[c].source_table(g) for g in grads] for c in configs}
        got = {c: [] for c in configs}
        for _ in range(7):
            for c in configs:
                got[c].append(bench(lambda i: prep_bucket(plans[c], tables[c][i], bucket, flag, 0.5, src, num_warps=c[1]), sets))
        nbytes = n * (src.itemsize + dst.itemsize)
        cells = [f"{c[0]}/{c[1]} {1e3 * statistics.median(v):.1f}us {100 * nbytes / statistics.median(v) / 1e9 / copy:.1f}% [{100 * nbytes / max(v) / 1e9 / copy:.1f}-{100 * nbytes / min(v) / 1e9 / copy:.1f}]" for c, v in got.items()]
        print(f"{target:.0e} {NAMES[src]}->{NAMES[dst]} copy {copy:.2f}: " + " | ".join(cells), flush=True)
        del params, grads, bucket, plans, tables
