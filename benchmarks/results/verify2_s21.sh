# Twenty-first session, second run on 2 x H200: the keep test with its mixed-dtype expectation fixed,
# the overlap proof twice (the host-delay case failed once in verify_s21.sh), then the full NVLink table
# with floor-shard-sync and every baseline, back to back.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for i in 1 2; do
  timeout 200 python3 -m pytest -q -s -rfEX tests/test_overlap_gpu.py $( [ $i = 1 ] && echo "tests/test_nccl.py::test_keep_grads_until_step_changes_no_bit" ) -p no:cacheprovider > $OUT/pytest_overlap_${i}_s21.log 2>&1; echo "pytest $i rc $?"
  grep -E "passed|failed" $OUT/pytest_overlap_${i}_s21.log | tail -1; grep -E "^(FAILED|ERROR|XPASS)|delay:" $OUT/pytest_overlap_${i}_s21.log
done
F='grep -v "^W\|Warning\|warn\|return func\|device_id\|^\[rank"'
PYTHONPATH=/tmp/site timeout 240 torchrun --nproc_per_node 2 benchmarks/bench_overlap.py \
  --systems floor,floor-sync,floor-shard-sync,tz-ce-keep,tz-ce,tz-fused,ddp,deepspeed,fsdp2 --buckets 1e6,25e6,1e8 --steps 20 \
  --out $OUT/full_s21.json 2>&1 | eval $F > $OUT/full_s21.log; echo "bench rc $?"
grep -E "^(floor|tz|deep|ddp|fsdp|system)|Error" $OUT/full_s21.log | cut -c1-140
