# Twenty-first session: socket_rs_s21.py on 2 x H200 over NCCL's socket transport, NCCL's INIT/NET log kept
# (how many channels and sockets each of the two communicators got).
source benchmarks/results/device_env.sh
env $SOCKET NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout 400 torchrun --nproc_per_node 2 benchmarks/results/socket_rs_s21.py > $OUT/socket_rs_nccl_s21.log 2>&1; echo "rc $?"
grep -E "^(RS|bench_overlap|tz comm)" $OUT/socket_rs_nccl_s21.log | tee $OUT/socket_rs_s21.log
grep -E "nChannels|Using network|NET/Socket : Using|nsocks|threads|comm 0x.*rank 0 nRanks" $OUT/socket_rs_nccl_s21.log | sort | uniq -c | head -20
