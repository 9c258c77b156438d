# Sixteenth session, last: keep_grads_until_step now gives every parameter of at least
# DIRECT_MIN_ELEMENTS a bucket of its own at any bucket size. The copy-engine GPU test, then
# tz-ce against tz-ce-keep at 1e6 / 25e6 / 1e8, order swapped.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
timeout 150 python3 -m pytest -q -s tests/test_copy_engine_gpu.py tests/test_layout.py -p no:cacheprovider > $OUT/pytest_alone_s16.log 2>&1; echo "pytest rc $?"
cd benchmarks
i=0
for systems in floor,floor-sync,tz-ce,tz-ce-keep floor,tz-ce-keep,tz-ce,floor-sync; do
  i=$((i+1))
  timeout 150 torchrun --nproc_per_node 2 bench_overlap.py --systems $systems --buckets 1e6,25e6,1e8 --steps 30 --out $OUT/alone_${i}_s16.json > $OUT/alone_${i}_s16.log 2>&1; echo "run $i rc $?"
done
tail -1 $OUT/pytest_alone_s16.log; grep -E "1000000 None keep=True" $OUT/pytest_alone_s16.log | head -4
for f in $OUT/alone_*_s16.log; do echo "== $f"; grep -E "^(floor|tz)|Error" $f | cut -c1-130; done
