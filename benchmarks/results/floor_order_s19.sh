# Nineteenth session, one H200: does bench_overlap favour the system it runs first? The floor five times in one
# process, back to back, rested (--rest-ms 40), back to back again.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
for r in 0 40 0; do echo "rest $r"; torchrun --nproc_per_node 1 benchmarks/bench_overlap.py --systems floor,floor,floor,floor,floor --buckets 1e6 --steps 20 --rest-ms $r 2>&1 | grep "^floor"; done 2>&1 | tee $OUT/floor_order_s19.log
