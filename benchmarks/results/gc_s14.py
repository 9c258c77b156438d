"""bench_overlap.py with Python's cyclic garbage collector off when TZ_NOGC=1 (bench_overlap
still collects explicitly between systems). Run from benchmarks/ like bench_overlap.py."""

import gc
import os

import bench_overlap

if __name__ == "__main__":
    if os.environ.get("TZ_NOGC") == "1":
        gc.disable()
    bench_overlap.main()
