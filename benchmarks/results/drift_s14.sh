export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv -lms 200 > $OUT/smi_drift_s14.csv 2>&1 &
SMI=$!
(cd benchmarks && PYTHONPATH=/tmp/site timeout 200 torchrun --nproc_per_node 2 bench_overlap.py --systems floor,tz-ce,floor,tz-fused,floor,tz-ce,floor --buckets 1e8 --steps 40 --out $OUT/drift_s14.json > $OUT/drift_s14.log 2>&1; echo "rc $?")
kill $SMI
grep -E "^(floor|tz)" $OUT/drift_s14.log | cut -c1-100
python3 - <<'PY'
import csv, os, collections
rows = list(csv.reader(open(os.environ["OUT"] + "/smi_drift_s14.csv")))
print(rows[0]); 
busy = [r for r in rows[1:] if len(r) > 4 and float(r[4].split()[0]) > 200]
print("samples >200W:", len(busy))
for r in busy[:: max(1, len(busy)//25)]: print(r)
PY
