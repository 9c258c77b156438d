B="torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --buckets 1e6 --warmup 4 --steps 12"
TZ_ABLATE=skel $B --systems floor,tz-ce > $OUT/gil_skel.log 2>&1
TZ_ABLATE=skel TZ_SWITCH=0.0001 $B --systems floor,tz-ce > $OUT/gil_skel_sw.log 2>&1
$B --systems floor,tz-fused,tz-ce > $OUT/gil_real.log 2>&1
TZ_SWITCH=0.0001 $B --systems floor,tz-fused,tz-ce > $OUT/gil_real_sw.log 2>&1
for f in skel skel_sw real real_sw; do echo "== $f"; grep -E "^(floor|tz)" $OUT/gil_$f.log; done
