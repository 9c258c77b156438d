#!/bin/bash
# Session 11: 2048-element, 2-warp prep launches. GPU tests of the kernel and the paths that prep,
# the official prep benchmark, then end to end: new default against the old one, interleaved.
set -u
timeout 200 python3 -m pytest -q tests/test_prep_kernel.py tests/test_prep_codegen.py tests/test_nccl.py tests/test_send_buffer.py tests/test_step_chunks.py 2>&1 | tail -1
python3 benchmarks/bench_prep.py 2>&1 | grep -v Warning > $OUT/prep_s11.log; tail -22 $OUT/prep_s11.log
run() { torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,tz-fused,tz-ce --buckets 1e6,25e6,1e8 2>&1 | grep -E "^(floor|tz-)" | sed "s/^/$1 /" | tee -a $OUT/warps_e2e_s11.log; }
for r in 1 2; do
  run new$r
  git apply -R benchmarks/results/warps_s11.patch && run old$r && git apply benchmarks/results/warps_s11.patch
done
