"""Proof of overlap on 2 GPUs (skipped with fewer): slow collectives hide behind backward, and the
compute stream never waits on the comm stream during backward.

Each bucket's collective is made artificially slow in one of two ways:
- ``gpu``: a ``torch.cuda._sleep`` kernel queued on the comm stream just before it. The sleep
  kernel holds one SM, and the fp16 GEMMs here are persistent cuBLAS kernels with one CTA per
  SM, so every GEMM launched meanwhile waits for it: this delay slows compute by itself.
- ``host``: the comm thread sleeps before it issues the collective. Nothing holds an SM; the
  collective simply starts later, as a slow network would make it finish later.
The copy-engine transport gets the host delay before each bucket's copies ("copy-engine host").
"""

from __future__ import annotations

import pathlib
import sys
import time

import pytest
import torch

from distributed import run_ranks

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_overlap import sleep_cycles  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


def _measure(delay_ms: float, kind: str, transport: str, in_flight: int = 10**6, steps: int = 6) -> dict:
    """Medians per step (ms): forward, fwd+bwd (compute stream, before the sync), fwd+bwd+sync,
    and the delay the collectives got in total (``comm``: measured on the comm thread for host
    delays, asked of the sleep kernels for GPU delays). With the copy-engine transport the
    delay comes before each bucket's copies instead."""
    import tritonzero.bucket as tzb
    from tritonzero import ZeroOptimizer
    from tritonzero.copy_engine import CopyEngineReduce

    torch.manual_seed(0)
    width, depth = 4096, 8
    with torch.device("cuda"):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)]).half()
    x = torch.randn(8192, width, device="cuda", dtype=torch.float16)
    # One bucket per layer (weight + bias), so every bucket's collective gets the delay.
    opt = ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=1e-6), bucket_size=width * width + width,
                        max_buckets_in_flight=in_flight, reduce_transport=transport)
    cycles = sleep_cycles(delay_ms) if kind == "gpu" else 0
    delayed = [0.0]  # ms of delay given this step

    def delay():
        if kind == "gpu":
            torch.cuda._sleep(cycles)  # on the comm stream: the collective starts this much later
            delayed[0] += delay_ms
        elif kind == "host":
            t = time.perf_counter()
            time.sleep(delay_ms / 1e3)  # on the comm thread: the collective is issued this much later
            delayed[0] += (time.perf_counter() - t) * 1e3

    # The collective the comm thread issues per bucket, and its stand-in with the delay first
    # (these buckets' gradients are large: the copy-engine transport copies them unprepped).
    owner, name = (CopyEngineReduce, "push_grads") if transport == "copy_engine" else (tzb, "reduce_scatter")
    real = getattr(owner, name)

    def slow(*args, **kwargs):
        delay()
        return real(*args, **kwargs)

    setattr(owner, name, slow)
    rows = []
    for i in range(steps + 2):
        e0, ef, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        delayed[0] = 0.0
        e0.record()
        loss = model(x).float().square().mean()
        ef.record()
        opt.backward(loss)
        e1.record()  # compute stream, end of backward: must not depend on any collective
        opt.finish_grad_sync()
        e2.record()
        e2.synchronize()
        if i >= 2:
            rows.append((e0.elapsed_time(ef), e0.elapsed_time(e1), e0.elapsed_time(e2), delayed[0]))
        opt.step()
        opt.zero_grad()
    setattr(owner, name, real)
    med = [sorted(col)[len(col) // 2] for col in zip(*rows)]
    return {"forward": med[0], "compute": med[1], "total": med[2], "comm": med[3], "buckets": len(opt.buckets)}


def _overlap_case(transport: str, kinds: list[str]) -> dict:
    base = _measure(0.0, "none", transport)
    per_bucket = (base["compute"] - base["forward"]) / base["buckets"]  # comm about as long as backward
    out = {}
    for kind in kinds:
        out[kind] = {
            "base": base,
            "slow": _measure(per_bucket, kind, transport),
            # One bucket in flight: compute waits for the previous bucket's collective before
            # the next bucket launches (DeepSpeed's schedule); printed for comparison.
            "serial": _measure(per_bucket, kind, transport, in_flight=1),
            "very_slow": _measure(4 * per_bucket, kind, transport),
        }
    return out


KINDS = ["host", "gpu"]
GPU_SLEEP_XFAIL = pytest.mark.xfail(
    strict=True,
    reason="known on 2 x H200 (2026-11-29): a sleep kernel before each collective holds an SM that "
    "backward's persistent GEMMs wait for, so the delayed chain runs after them; with the host "
    "delay (no SM held) the schedule overlaps. See benchmarks/RESULTS.md",
)


@pytest.fixture(scope="module")
def overlap():
    return run_ranks(2, _overlap_case, "collective", KINDS, backend="nccl")


@pytest.fixture(scope="module")
def overlap_copy_engine():
    """The copy-engine transport with the host delay (no SM held by the delay)."""
    return run_ranks(2, _overlap_case, "copy_engine", ["host"], backend="nccl")


@pytest.mark.parametrize("kind", ["host", pytest.param("gpu", marks=GPU_SLEEP_XFAIL), "copy-engine host"])
def test_slow_comm_costs_max_not_sum(request, kind):
    runs = request.getfixturevalue("overlap_copy_engine" if kind.startswith("copy-engine") else "overlap")
    kind = kind.split()[-1]
    for r in runs:
        base, slow, serial = r[kind]["base"], r[kind]["slow"], r[kind]["serial"]
        fwd, bwd, comm = base["forward"], base["compute"] - base["forward"], slow["comm"]
        total_sum = base["total"] + comm  # comm after compute, nothing hidden
        # Overlapped: the chain starts at the first bucket's "ready" (one layer into backward)
        # and runs its full length; backward runs beside it. This is max(compute, comm) plus
        # what nothing can hide: forward and the first bucket's wait.
        total_max = fwd + max(bwd, bwd / base["buckets"] + comm)
        print(f"{kind} delay: forward {fwd:.1f} ms, backward {bwd:.1f} ms, comm {comm:.1f} ms: "
              f"tritonzero {slow['total']:.1f} ms (max schedule {total_max:.1f}, sum {total_sum:.1f}; "
              f"one bucket in flight {serial['total']:.1f})")
        assert comm > 0.8 * bwd, r  # the delays did happen
        # At least 60% of the shorter of backward and comm is hidden, and the total is within
        # 30% of that time of the max schedule (each bucket's issue and collective add to the
        # chain beyond its delay: 0.1-0.2 ms a bucket on the test machines).
        assert slow["total"] < total_sum - 0.6 * min(bwd, comm), r
        assert slow["total"] < total_max + 0.3 * min(bwd, comm), r


@pytest.mark.parametrize("kind", [*KINDS, "copy-engine host"])
def test_compute_never_waits_on_comm(request, kind):
    runs = request.getfixturevalue("overlap_copy_engine" if kind.startswith("copy-engine") else "overlap")
    kind = kind.split()[-1]
    for r in runs:
        base, very_slow = r[kind]["base"], r[kind]["very_slow"]
        print(f"{kind} delay: fwd+bwd on the compute stream: {base['compute']:.1f} ms alone, {very_slow['compute']:.1f} ms "
              f"with comm 4x longer than backward (fwd+bwd+sync {very_slow['total']:.1f} ms)")
        # The delays did happen, and the sync waited for them.
        assert very_slow["comm"] > 3 * (base["compute"] - base["forward"]) and very_slow["total"] > very_slow["comm"], r
        assert very_slow["compute"] < 1.15 * base["compute"] + 0.5, r
