#!/bin/bash
# Session 11, first x2 batch: GPU tests on the working tree (review refactor + prepped release),
# then peak memory at 1e6 for HEAD / A (prepped event) / B (record_stream), two rounds.
set -u
python3 -m pytest -q -s tests/test_nccl.py tests/test_overlap_gpu.py tests/test_race_gpu.py tests/test_host_syncs_gpu.py 2>&1 | grep -E "rel_err|passed|failed|Error|error" > $OUT/pytest_s11.log
grep -c rel_err $OUT/pytest_s11.log; tail -2 $OUT/pytest_s11.log
B="--systems floor,tz-fused,deepspeed --buckets 1e6 --warmup 5 --steps 15"
run() { torchrun --nproc_per_node 2 benchmarks/bench_overlap.py $B --out $OUT/mem_$1_$2.json > $OUT/mem_$1_$2.log 2>&1; echo "== $1 round $2"; grep -E "^(floor|tritonzero|deepspeed)" $OUT/mem_$1_$2.log | head -5; }
for r in 1 2; do
  git apply -R benchmarks/results/release_prepped_A_s11.patch && run head $r
  git apply benchmarks/results/release_prepped_A_s11.patch && run A $r
  git apply benchmarks/results/release_record_stream_B_s11.patch && run B $r
  git apply -R benchmarks/results/release_record_stream_B_s11.patch
done
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob(os.environ["OUT"]+"/mem_*.json")):
    rows=json.load(open(f))
    print(os.path.basename(f), " ".join(f"{r['system'][:18]}:{r['peak_gib']:.5f}/{r.get('fwd_bwd_sync_ms',float('nan')):.2f}" for r in rows))
PY
