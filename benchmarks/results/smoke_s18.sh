# Eighteenth session: every benchmark script touched by the join_ranks / profiled_passes refactor, run briefly.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
F='grep -v "^W\|Warning\|warn\|return func\|device_id\|^\[rank"'
T="torchrun --nproc_per_node 2"
set -o pipefail
$T benchmarks/bench_overlap.py --systems floor,tz-ce-keep --buckets 1e6 --warmup 1 --steps 3 --rest-ms 5 2>&1 | eval $F | tail -4 && echo "== bench_overlap ok"
$T benchmarks/profile_gpu.py --systems floor,tz-ce-keep --bucket 1e6 --warmup 1 --steps 2 --lead-ms 5 2>&1 | eval $F | tail -4 && echo "== profile_gpu ok"
$T benchmarks/profile_host.py --bucket 1e6 2>&1 | eval $F | tail -4 && echo "== profile_host ok"
$T benchmarks/results/kernels_s18.py --systems floor,keep-skel --warmup 1 --steps 2 2>&1 | eval $F | head -5 && echo "== kernels_s18 ok"
$T benchmarks/results/split_s18.py --systems floor,tz-ce-keep --warmup 1 --steps 3 --pad-ms 5 2>&1 | eval $F | tail -3 && echo "== split_s18 ok"
$T benchmarks/results/rendezvous_s17.py --warmup 1 --steps 3 2>&1 | eval $F | tail -3 && echo "== rendezvous_s17 ok"
