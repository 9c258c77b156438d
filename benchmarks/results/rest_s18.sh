# Eighteenth session: the full table twice on one machine, with and without a 40 ms GPU rest
# after every step (bench_overlap.py --rest-ms), then split_s18.py with and without it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
F='grep -v "^W\|Warning\|warn\|return func\|device_id\|^\[rank"'
S=floor,floor-sync,tz-ce-keep,tz-ce,tz-fused,ddp,deepspeed,fsdp2
for rest in 40 0; do
  PYTHONPATH=/tmp/site torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems $S --buckets 1e6,25e6,1e8 \
    --steps 20 --rest-ms $rest --out $OUT/full_rest${rest}_s18.json 2>&1 | eval $F | tee $OUT/full_rest${rest}_s18.log
done
