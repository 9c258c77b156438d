# Fifteenth session: per-step fwd+bwd+sync of every rank (50 steps), to compare the synchronous
# floor with the max of two independent floors.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=index,clocks.sm,power.draw,power.limit --format=csv,noheader
cd benchmarks
for i in 1 2; do
timeout 200 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,floor-sync,tz-ce,tz-fused --buckets 1e6 --steps 50 --out $OUT/jitter${i}_s15.json > $OUT/jitter${i}_s15.log 2>&1; echo "rc $?"
grep -E "^(floor|tz|system)|Error" $OUT/jitter${i}_s15.log | cut -c1-130
done
