# A/B of the copy-engine transport copying straight from the gradients (this tree) against
# 9613848 (OLD_TREE: `git archive 9613848 | tar -x -C OLD_TREE`), two interleaved rounds; the
# GPU tests first. Run on nvidia-h200-x2 from the repository root, with .whl/ holding the
# DeepSpeed wheels (not needed for these systems).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/old OLD_TREE > /dev/null 2>&1 || echo "old install failed"
(cd /tmp && PYTHONPATH=/tmp/old:/tmp/site python3 -c "import tritonzero.kernels as k, tritonzero as t; print('old', t.__file__, k.__file__)"; python3 -c "import tritonzero as t; print('new', t.__file__)")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PYTHONPATH=/tmp/site timeout 300 python3 -m pytest -q -x -s tests/test_copy_engine_gpu.py tests/test_nccl.py > $OUT/pytest_ce_s12.log 2>&1; echo "tests rc $?"; grep -E "passed|failed|error" $OUT/pytest_ce_s12.log | tail -3
for r in 1 2; do for v in new old; do
  if [ $v = old ]; then P=/tmp/old:/tmp/site; else P=/tmp/site; fi
  PYTHONPATH=$P timeout 150 torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --systems floor,tz-ce,tz-fused --buckets 1e6,25e6,1e8 --out $OUT/ab_${v}${r}_s12.json > $OUT/ab_${v}${r}_s12.log 2>&1; echo "$v$r rc $?"
done; done
grep -h "rel_err" $OUT/pytest_ce_s12.log | grep "step" | head -30
for f in $OUT/ab_*_s12.log; do echo "== $f"; grep -E "^(floor|tz)" $f | cut -c1-150; done
