"""One-off (session 11): (block, warps) per bucket size and dtype pair, us and % of device copy."""
import sys, torch
sys.path.insert(0, "benchmarks")
from bench_prep import PAIRS, NAMES, bucket_of, transformer_shapes, width_for, make_case, bench, copy_bandwidth
from tritonzero.kernels import prep_bucket
copy = copy_bandwidth()
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
configs = [(1024, 1), (1024, 2), (2048, 2), (4096, 2), (1024, 4), (2048, 4), (4096, 4)]
print(f"copy {copy:.2f} TB/s; cells: block/warps us (% of copy)")
for rnd in (1, 2):
    for target in (1_000_000, 4_000_000, 32_000_000, 100_000_000):
        sizes = bucket_of(transformer_shapes(width_for(target)), target)
        n = sum(sizes)
        for src, dst in PAIRS:
            sets = max(2, min(8, int(4e8 // (n * 6))))
            res = []
            for block, warps in configs:
                plan, grads, tables, bucket = make_case(sizes, src, dst, block, sets)
                ms = bench(lambda i: prep_bucket(plan, tables[i], bucket, flag, 0.5, src, num_warps=warps), sets)
                res.append(f"{block}/{warps} {ms * 1e3:6.1f} ({100 * n * (src.itemsize + dst.itemsize) / ms / 1e9 / copy:4.1f})")
                del plan, grads, tables, bucket
            print(f"r{rnd} {target:.0e} {len(sizes):3} {NAMES[src]}->{NAMES[dst]}  " + " | ".join(res), flush=True)
