"""Per timed window (clocks_s14.py): fwd+bwd+sync and step medians, and the GPUs' mean SM clock,
power and the share of samples with a power-cap throttle, from the nvidia-smi trace.

    python clocks_table_s14.py rows.json windows.txt smi.csv
"""

import datetime
import json
import statistics
import sys

rows = [r for r in json.load(open(sys.argv[1])) if "error" not in r and "collectives" not in r["system"]]
windows = [tuple(map(float, line.split())) for line in open(sys.argv[2])]
samples = []
for line in open(sys.argv[3]).read().splitlines()[1:]:
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((t, int(f[1]), float(f[2]), float(f[3]), int(f[5], 16)))
    except (ValueError, IndexError):
        continue
floor = rows[0]
print(f"{'system':<24} {'fwd+bwd+sync':>12} {'x floor':>7} {'step':>6} {'SM MHz':>7} {'W':>5} {'capped':>6} n")
for r, (s, e) in zip(rows, windows):
    inside = [x for x in samples if s <= x[0] <= e]
    mhz = statistics.mean(x[2] for x in inside) if inside else float("nan")
    watts = statistics.mean(x[3] for x in inside) if inside else float("nan")
    capped = sum(1 for x in inside if x[4] & 0x4) / max(1, len(inside))
    print(f"{r['system']:<24} {r['fwd_bwd_sync_ms']:>12.2f} {r['fwd_bwd_sync_ms'] / floor['fwd_bwd_sync_ms']:>7.3f} "
          f"{r['step_ms']:>6.1f} {mhz:>7.0f} {watts:>5.0f} {capped:>6.2f} {len(inside)}")
