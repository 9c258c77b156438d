# Fifteenth session: the no-bytes skeleton again, against the synchronous floor. With
# skeleton_experiment_s15.patch applied, TZ_SKELETON=1 makes every bucket skip prep, copies and
# collectives; hooks, events, the comm thread, shard allocations and (copy engine) the barrier
# in finish_grad_sync stay. Same machine, skeleton off / on / off / on.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
i=0
for S in 0 1 0 1; do
  i=$((i+1))
  (cd benchmarks && TZ_SKELETON=$S timeout 100 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,floor-sync,tz-ce --buckets 1e6,1e8 --steps 30 --out $OUT/skel${S}_${i}_s15.json > $OUT/skel${S}_${i}_s15.log 2>&1; echo "skeleton $S ($i) rc $?")
done
for f in $OUT/skel*_s15.log; do echo "== $f"; grep -E "^(floor|tz)|Error" $f | cut -c1-130; done
