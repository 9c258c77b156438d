#!/bin/bash
# Session 11: record_stream for every gradient (C) against HEAD's held list, 1e6 peak; GPU tests of C.
set -u
B="--buckets 1e6 --warmup 3 --steps 8"
torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,tz-fused,tz-ce,deepspeed $B --out $OUT/recstream_C_s11.json 2>&1 | grep -E "^(floor|tz-|deep)" | sed "s/^/C    /"
git apply -R benchmarks/results/release_record_stream_all_C_s11.patch
torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,tz-fused,tz-ce $B --out $OUT/recstream_head_s11.json 2>&1 | grep -E "^(floor|tz-)" | sed "s/^/head /"
git apply benchmarks/results/release_record_stream_all_C_s11.patch
python3 - <<'PY'
import json, os
for v in ("C", "head"):
    for r in json.load(open(f"{os.environ['OUT']}/recstream_{v}_s11.json")):
        print(v, r["system"], f"{r['peak_gib']:.5f}")
PY
timeout 170 python3 -m pytest -q tests/test_race_gpu.py tests/test_host_syncs_gpu.py tests/test_nccl.py 2>&1 | tail -1
