#!/bin/bash
# Session 11: prep kernel variants at 32M/100M 16-bit (one GPU).
python3 benchmarks/results/prep_extra_s11.py base
sed -i 's/        tl.store(dst + offs, y)$/        tl.store(dst + offs, y, cache_modifier=".cs")/; s/        tl.store(dst + offs, y, mask=offs < dst_left)$/        tl.store(dst + offs, y, mask=offs < dst_left, cache_modifier=".cs")/' kernels/bucket_prep.py
grep -c '".cs"' kernels/bucket_prep.py
python3 benchmarks/results/prep_extra_s11.py store_cs
sed -i 's/cache_modifier=".cs"/eviction_policy="evict_first"/' kernels/bucket_prep.py
python3 benchmarks/results/prep_extra_s11.py store_ef
sed -i 's/\(tl.store(dst + offs, y.*\), eviction_policy="evict_first")$/\1)/' kernels/bucket_prep.py
sed -i 's/x = tl.load(src + offs, eviction_policy="evict_first")/x = tl.load(src + offs, cache_modifier=".cg")/' kernels/bucket_prep.py
python3 benchmarks/results/prep_extra_s11.py load_cg
