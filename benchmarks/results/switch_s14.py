"""bench_overlap.py with Python's thread switch interval set from TZ_SWITCH (seconds; unset:
Python's default, 5 ms), and every system's per-step fwd+bwd+sync times written to TZ_STEPS
(rank 0). Run from benchmarks/ like bench_overlap.py."""

import json
import os
import statistics
import sys

import bench_overlap

SERIES = []
_median = statistics.median


def median_recording(values):
    SERIES.append(list(values))
    return _median(values)


if __name__ == "__main__":
    if os.environ.get("TZ_SWITCH"):
        sys.setswitchinterval(float(os.environ["TZ_SWITCH"]))
    bench_overlap.statistics.median = median_recording
    bench_overlap.main()
    if os.environ.get("RANK") == "0":
        # run() takes three medians per system, fwd+bwd+sync first.
        with open(os.environ["TZ_STEPS"], "w") as f:
            json.dump(SERIES[0::3], f)
