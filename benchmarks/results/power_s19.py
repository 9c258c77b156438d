"""Nineteenth session: on ONE power-capped GPU, does fwd+bwd slow down when the step after it is
shorter, or when bytes move beside backward? (The eighteenth session's reading of the NVLink
gap, tested with no second GPU, no communication and no tritonzero code.)

The benchmark's floor model (``bench_overlap``: 8 blocks, d=2048, fp16, 4 x 1024 tokens) is
trained back to back (the host never waits for the GPU inside a run) with its fp32-master
AdamW, split in two halves by parameter count. What follows each fwd+bwd varies:

- ``full``: the floor's step (both halves), as in ``bench_overlap``;
- ``half``: only the first half stepped, about the length of tritonzero's sharded step on 2 ranks;
- ``none``: no step at all (the GPU goes straight on to the next forward);
- ``full+restR`` / ``half+restR``: that step, then R ms of GPU sleep (``torch.cuda._sleep``);
- ``full+copy``: the floor's step, and 403 MB (half the model's fp16 gradients, what one rank
  of two sends with the copy engine) copied device to device on a side stream while backward
  runs, in 32 pieces; ``half+copy`` both changes at once, a one-GPU stand-in for tritonzero's
  copy engine on 2 ranks (a shorter step, bytes moved beside backward), with no peer at all.

Variants run round-robin, ``--rounds`` times, each ``--warmup`` + ``--steps`` steps, so drift
over the run hits all alike. ``--sync-each-step`` makes the host wait for the GPU at every
step's start, as ``bench_overlap`` does. Printed per variant: median fwd+bwd ms over every timed
step, its ratio to ``full`` and to ``full+rest40``, the median step (what follows backward,
rest included), and NVML's median SM clock and power over its timed windows
(``split_s18.Clocks``; the windows include the steps and rests).

    python benchmarks/results/power_s19.py [--rounds 8] [--sync-each-step]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
import bench_overlap as bo  # noqa: E402
from split_s18 import Clocks  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--variants", default="full,half,none,full+rest2,full+rest5,full+rest10,full+rest40,half+rest3,full+copy,half+copy")
    p.add_argument("--sync-each-step", action="store_true", help="the host waits for the GPU at every step's start")
    args = p.parse_args()
    torch.cuda.set_device(0)
    x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)
    model = bo.fresh_model()
    params = list(model.parameters())
    first = bo.share_of(params, 0.5)
    second = params[len(first):]
    opt_a, opt_b = bo.MasterAdamW(first, lr=1e-5), bo.MasterAdamW(second, lr=1e-5)
    n_grad = sum(p.numel() for p in params) // 2
    src = torch.randn(n_grad, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)
    side = torch.cuda.Stream()
    cycles = {}

    def one_step(variant: str) -> tuple[torch.cuda.Event, ...]:
        step, _, rest = variant.partition("+")
        if args.sync_each_step:
            torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        loss = bo.scaled_loss(model(x))
        if rest == "copy":
            side.wait_stream(torch.cuda.current_stream())  # from backward's start on
            with torch.cuda.stream(side):
                for s, d in zip(src.chunk(32), dst.chunk(32)):
                    d.copy_(s)
        loss.backward()
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        if step in ("full", "half"):
            opt_a.step()
        if step == "full":
            opt_b.step()
        opt_a.zero_grad()
        opt_b.zero_grad()
        if rest == "copy":
            torch.cuda.current_stream().wait_stream(side)
        elif rest.startswith("rest"):
            ms = float(rest[4:])
            if ms not in cycles:
                cycles[ms] = bo.sleep_cycles(ms)
            torch.cuda._sleep(cycles[ms])
        after = torch.cuda.Event(enable_timing=True)
        after.record()
        return start, end, after

    variants = args.variants.split(",")
    for v in variants:  # sleep calibration and first launches out of the timed rounds
        one_step(v)
    torch.cuda.synchronize()
    fwd_bwd = {v: [] for v in variants}
    step_ms = {v: [] for v in variants}
    nvml = {v: [] for v in variants}
    clocks = Clocks(0)
    with clocks:
        for r in range(args.rounds):
            for v in variants:
                for _ in range(args.warmup):
                    one_step(v)
                torch.cuda.synchronize()  # the window NVML's samples are cut to
                since = time.monotonic()
                marks = [one_step(v) for _ in range(args.steps)]
                torch.cuda.synchronize()
                until = time.monotonic()
                fwd_bwd[v] += [s.elapsed_time(e) for s, e, _ in marks]
                step_ms[v] += [e.elapsed_time(a) for _, e, a in marks]
                nvml[v] += [(c, w) for t, c, w, _ in clocks.samples if since <= t <= until]
    med = statistics.median
    base, rested = med(fwd_bwd["full"]), med(fwd_bwd.get("full+rest40", fwd_bwd["full"]))
    mode = "host synced every step" if args.sync_each_step else "back to back"
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {args.rounds} rounds x {args.steps} steps per variant, {mode}")
    print(f"{'variant':<12} {'fwd+bwd ms':>10} {'p10-p90':>13} {'x full':>7} {'x rested':>8} {'step ms':>8} {'SM MHz':>7} {'power W':>8}")
    for v in variants:
        t = sorted(fwd_bwd[v])
        n = len(t)
        c, w = zip(*nvml[v])
        print(f"{v:<12} {med(t):>10.3f} {t[n // 10]:>6.2f}-{t[(9 * n) // 10]:<6.2f} {med(t) / base:>7.4f} {med(t) / rested:>8.4f} {med(step_ms[v]):>8.2f} "
              f"{med(c):>7.0f} {med(w):>8.0f}", flush=True)


if __name__ == "__main__":
    main()
