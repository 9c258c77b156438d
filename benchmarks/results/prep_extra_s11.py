"""One-off (session 11): more (block, warps) configs for 16-bit 32M buckets, % of device copy."""
import sys, torch
sys.path.insert(0, "benchmarks")
from bench_prep import bucket_of, transformer_shapes, width_for, make_case, bench, copy_bandwidth
from tritonzero.kernels import prep_bucket
label = sys.argv[1]
copy = copy_bandwidth()
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
configs = [(2048, 2), (4096, 2), (2048, 4), (4096, 4), (8192, 4), (16384, 8), (16384, 16), (8192, 8)]
for target in (32_000_000, 100_000_000):
    sizes = bucket_of(transformer_shapes(width_for(target)), target)
    n = sum(sizes)
    for dt in (torch.float16, torch.bfloat16):
        sets = max(2, min(8, int(4e8 // (n * 6))))
        res = []
        for block, warps in configs:
            plan, grads, tables, bucket = make_case(sizes, dt, dt, block, sets)
            ms = bench(lambda i: prep_bucket(plan, tables[i], bucket, flag, 0.5, dt, num_warps=warps), sets)
            res.append(f"{block}/{warps}:{100 * n * 4 / ms / 1e9 / copy:.1f}")
            del plan, grads, tables, bucket
        print(f"{label:8} {target:.0e} {dt} copy {copy:.2f} TB/s  " + " ".join(res), flush=True)
