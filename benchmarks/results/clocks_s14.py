"""bench_overlap.py with each system's timed window stamped (rank 0, wall clock), so that an
nvidia-smi trace taken beside it (clocks_s14.sh) gives each system's SM clock and power while
it was timed. Run from benchmarks/ like bench_overlap.py."""

import os
import time

import torch

import bench_overlap as b

WINDOWS = []


def stamped(builder, args):
    """The builder's closures, with the wall time of the first and last timed step recorded."""

    def build(model, a):
        fwd_bwd, step = builder(model, a)
        count = [0]

        def fwd_bwd_stamped(x):
            i = count[0]
            count[0] += 1
            if i == a.warmup:
                torch.cuda.synchronize()
                WINDOWS.append([time.time(), None])
            fwd_bwd(x)

        def step_stamped():
            step()
            if count[0] == a.warmup + a.steps:
                torch.cuda.synchronize()
                WINDOWS[-1][1] = time.time()

        return fwd_bwd_stamped, step_stamped

    return build


original = b.plan_systems


def plan(*a, **k):
    return [(name, None if f is None else stamped(f, None)) for name, f in original(*a, **k)]


b.plan_systems = plan
if __name__ == "__main__":
    b.main()
    if os.environ.get("RANK") == "0":
        with open(os.environ["TZ_WINDOWS"], "w") as f:
            for s, e in WINDOWS:
                f.write(f"{s} {e}\n")
