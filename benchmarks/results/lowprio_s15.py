"""bench_overlap.py with tritonzero's comm stream at normal priority when TZ_LOWPRIO=1 (fifteenth session)."""
import os

import bench_overlap

_build_tz = bench_overlap.build_tz


def build_tz(model, args, bucket, **options):
    if os.environ.get("TZ_LOWPRIO") == "1":
        options["high_priority_comm"] = False
    return _build_tz(model, args, bucket, **options)


bench_overlap.build_tz = build_tz
bench_overlap.main()
