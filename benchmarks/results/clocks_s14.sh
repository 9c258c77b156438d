export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /dev/null 2>&1 || echo "site install failed"
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1 || echo "editable install failed"
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,nounits -lms 50 > $OUT/smi_clocks_s14.csv 2>&1 &
SMI=$!
cp benchmarks/results/clocks_s14.py benchmarks/
(cd benchmarks && TZ_WINDOWS=$OUT/windows_clocks_s14.txt PYTHONPATH=/tmp/site timeout 300 torchrun --nproc_per_node 2 clocks_s14.py --systems floor,tz-ce,tz-fused,deepspeed,ddp,floor,tz-ce,tz-fused,floor --buckets ${BUCKETS:-1e8} --steps 100 --out $OUT/clocks_s14.json > $OUT/clocks_s14.log 2>&1; echo "rc $?")
kill $SMI
rm benchmarks/clocks_s14.py
grep -E "^(floor|tz|deep|ddp)" $OUT/clocks_s14.log | cut -c1-100
python3 benchmarks/results/clocks_table_s14.py $OUT/clocks_s14.json $OUT/windows_clocks_s14.txt $OUT/smi_clocks_s14.csv
