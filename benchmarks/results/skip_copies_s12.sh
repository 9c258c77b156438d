# Ablation of the copy-engine direct copies: this tree with skip_copies_s12.patch applied in
# EXP_TREE (TZ_SKIP=own: no copy into this rank's shard; peer: no copy to the peer; timing only,
# the results are wrong), two interleaved rounds; the copy-engine overlap tests first.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/expA EXP_TREE > /dev/null 2>&1 || echo "expA install failed"
timeout 200 python3 -m pytest -q tests/test_overlap_gpu.py -k "copy-engine" -s > $OUT/pytest_overlap_ce_s12.log 2>&1; echo "tests rc $?"; grep -E "delay|passed|failed" $OUT/pytest_overlap_ce_s12.log | tail -6
for r in 1 2; do for v in none own peer; do
  TZ_SKIP=$v PYTHONPATH=/tmp/expA timeout 100 torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,tz-ce --buckets 1e6,25e6,1e8 > $OUT/skip_${v}${r}_s12.log 2>&1; echo "$v$r rc $?"
done; done
for f in $OUT/skip_*_s12.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-80; done
