# Nineteenth session: bench_overlap's new floor-shard-sync row and the refactored power_s19.py, briefly, on ONE H200
# (one rank: the shard is the whole model, so floor-shard-sync equals floor-sync here; 2 GPUs were not lent).
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
torchrun --nproc_per_node 1 benchmarks/bench_overlap.py --systems floor,floor-sync,floor-shard-sync,tz-fused --buckets 25e6 --warmup 3 --steps 8 2>&1 | grep -v -i "warn" | tail -8 | tee $OUT/smoke_s19.log
python3 benchmarks/results/power_s19.py --rounds 1 --steps 3 --warmup 1 --variants full,half,half+copy 2>&1 | grep -v Warning | tee -a $OUT/smoke_s19.log
