# Twenty-first session: socket_rs_s21.py on 2 x H200 over NCCL's socket transport, NCCL's INIT/NET log kept
# (how many channels and sockets each of the two communicators got).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
  timeout 400 torchrun --nproc_per_node 2 benchmarks/results/socket_rs_s21.py > $OUT/socket_rs_nccl_s21.log 2>&1; echo "rc $?"
grep -E "^(RS|bench_overlap|tz comm)" $OUT/socket_rs_nccl_s21.log | tee $OUT/socket_rs_s21.log
grep -E "nChannels|Using network|NET/Socket : Using|nsocks|threads|comm 0x.*rank 0 nRanks" $OUT/socket_rs_nccl_s21.log | sort | uniq -c | head -20
