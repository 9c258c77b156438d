# Twenty-first session: the seventeenth session's socket run (overlap_socket_s17.sh) on the current code, another machine.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo timeout 420 torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,collectives,tz-fused,tz-overlap --buckets 1e6,4e6,25e6 --warmup 3 --steps 8 --out $OUT/overlap_socket_s21.json > $OUT/overlap_socket_s21.log 2>&1; echo "socket rc $?"
grep -v -i "warn\|guessing" $OUT/overlap_socket_s21.log | tail -14
