# Fifteenth session: the comm stream at normal priority (high_priority_comm=False) against the
# default high priority, ABAB on one machine. With the copy engine, the comm stream's SM work is
# the own-slice copies and the prep of small buckets; at normal priority it yields to backward.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
cp benchmarks/results/lowprio_s15.py benchmarks/
i=0
for v in high low high low; do
  i=$((i+1))
  if [ $v = low ]; then P=1; else P=0; fi
  (cd benchmarks && TZ_LOWPRIO=$P timeout 140 torchrun --nproc_per_node 2 lowprio_s15.py --systems floor,floor-sync,tz-ce,tz-fused --buckets 1e6,1e8 --steps 30 --out $OUT/prio_${v}${i}_s15.json > $OUT/prio_${v}${i}_s15.log 2>&1; echo "$v$i rc $?")
done
rm benchmarks/lowprio_s15.py
for f in $OUT/prio_*_s15.log; do echo "== $f"; grep -E "^(floor|tz)|Error" $f | cut -c1-120; done
