B="torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --buckets 1e6 --warmup 5 --steps 20"
for v in none skel skel,noalloc skel,noevents skel,nothread skel,nohook skel,noalloc,noevents,nothread; do
  TZ_ABLATE=$v $B --systems floor,tz-ce,floor,tz-ce > $OUT/skel2_$v.log 2>&1
  echo "== $v"; grep -E "^(floor|tz)" $OUT/skel2_$v.log
done
