# Twenty-second session: the socket table with the systems run round-robin (--rounds 4), pooled over the rounds
# (two identical tritonzero systems, 1e6 and 4e6 buckets, differed by up to 11% within one pass before;
# 4e6 is the 1e6 layout again on this model, so the 1e6, 25e6 and 1e8 are run).
source benchmarks/results/device_env.sh
env $SOCKET timeout 480 torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,collectives,tz-fused,tz-overlap --buckets 1e6,25e6,1e8 --warmup 3 --steps 10 --rounds 4 --out $OUT/overlap_socket_s22.json > $OUT/overlap_socket_s22.log 2>&1; echo "socket rc $?"
sed -n '/^pooled/,$p' $OUT/overlap_socket_s22.log | grep -v -i "warn\|guessing"
