"""Eighteenth session: where a synchronous step's extra time goes, per rank and per step.

For each system, every timed step records four CUDA events on the compute stream: the step's
start, forward's end (the loss), backward's end (after ``opt.backward`` / ``loss.backward()``,
before any sync) and the sync's end (after ``finish_grad_sync()`` / the one-element
all-reduce). Per rank it prints the medians of "forward", "fwd+bwd" (start to backward's end)
and "wait" (backward's end to the sync's end), and how much later rank 1 reached backward's end
than rank 0 (the ranks start each step together: the previous step ended in a collective). Systems: the no-sync floor, ``floor-sync``,
tritonzero by copy engine (with and without ``keep_grads_until_step``) and by NCCL, and three
timing-only ablations of the copy engine with keep (``--systems``): no copies at all, or the
copies of one rank only (which splits the cost of a GPU's outgoing reads from its incoming
writes); and three of the floor: its parameters as views of bucket buffers, hooks that take
each gradient out of ``.grad`` as tritonzero's do, or an unused symmetric-memory buffer the
size of the copy engine's receive slots. ``--pad-ms`` rests the GPU after every step;
``--busy-ms`` keeps it drawing power there instead (GEMMs).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node 2 benchmarks/results/split_s18.py [--steps 40] [--bucket 1e6]
"""
import argparse
import ctypes
import os
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_overlap as bo  # noqa: E402
from tritonzero import ZeroOptimizer  # noqa: E402
from tritonzero.bucket import Bucket  # noqa: E402
from tritonzero.copy_engine import DIRECT_MIN_ELEMENTS  # noqa: E402
from tritonzero.layout import plan_buckets  # noqa: E402

MARKS: list[tuple[torch.cuda.Event, ...]] = []
HELD: list = []  # what a system keeps alive until the next one is built
ISSUED: list[float] = []  # host time at which each fwd_bwd call began


class Clocks:
    """A host thread that samples this GPU's SM clock (MHz), power (W) and clock-event reasons
    through NVML every ``period`` seconds while it runs (``with Clocks() as c: ...``)."""

    def __init__(self, index: int, period: float = 0.002):
        self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        self.nvml.nvmlInit_v2()
        self.handle = ctypes.c_void_p()
        self.nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle))
        self.period, self.samples, self._stop = period, [], threading.Event()

    def _run(self):
        clock, power, reasons = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        while not self._stop.is_set():
            self.nvml.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(clock))  # NVML_CLOCK_SM
            self.nvml.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(power))
            self.nvml.nvmlDeviceGetCurrentClocksEventReasons(self.handle, ctypes.byref(reasons))
            self.samples.append((time.monotonic(), clock.value, power.value / 1e3, reasons.value))
            time.sleep(self.period)

    def __enter__(self):
        self.samples.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self, since: float) -> tuple[float, float, float]:
        """From host time ``since`` on: median SM clock, median power, and the share of samples
        with a power-cap reason (SW power cap 0x4, HW power brake 0x80)."""
        _, clocks, powers, reasons = zip(*(x for x in self.samples if x[0] >= since))
        return statistics.median(clocks), statistics.median(powers), sum(bool(r & 0x84) for r in reasons) / len(reasons)


def busy(build, ms: float):
    """``build`` with ``ms`` of 8192-square fp16 GEMMs after each step instead of a sleep: the
    GPU keeps drawing power where ``--pad-ms`` lets it rest."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a @ a
    e0.record()
    for _ in range(10):
        a @ a
    e1.record()
    e1.synchronize()
    n = max(1, round(ms * 10 / e0.elapsed_time(e1)))

    def wrapped(model, args):
        fwd_bwd, step = build(model, args)

        def step_then_work():
            step()
            for _ in range(n):
                a @ a
        return fwd_bwd, step_then_work
    return wrapped


def event() -> torch.cuda.Event:
    e = torch.cuda.Event(enable_timing=True)
    e.record()
    return e


def marked(forward, backward, sync):
    """fwd_bwd(x): ``loss = forward(x)``, ``backward(loss)``, ``sync()``, with events at the
    start and after each."""
    def fwd_bwd(x):
        ISSUED.append(time.monotonic())
        start = event()
        loss = forward(x)
        fwd = event()
        backward(loss)
        bwd = event()
        sync()
        MARKS.append((start, fwd, bwd, event()))
    return fwd_bwd


def floor(with_sync: bool = False, views: bool = False, hooks: bool = False, symm: bool = False):
    """The floor (``with_sync``: ``floor-sync``). ``views``: its parameters first become views of
    flat per-bucket buffers laid out as tritonzero's copy engine with keep lays them out.
    ``hooks``: a post-accumulate-grad hook per parameter takes each gradient out of ``.grad``
    (as tritonzero's does) and the step puts them back. ``symm``: a symmetric-memory buffer the
    size of the copy engine's receive slots is allocated and mapped on every rank, never used."""
    def build(model, args):
        if symm:
            import torch.distributed._symmetric_memory as symm_mem
            nbytes = sum(p.numel() for p in model.parameters()) // dist.get_world_size() * 2
            buffer = symm_mem.empty(nbytes, dtype=torch.uint8, device="cuda")
            HELD.append((buffer, symm_mem.rendezvous(buffer, dist.group.WORLD)))
        if views:
            params = [p for p in model.parameters()]
            for i, layout in enumerate(plan_buckets(params, [0] * len(params), int(args.bucket), dist.get_world_size(),
                                                    alone_from=DIRECT_MIN_ELEMENTS)):
                Bucket(i, layout, params, dist.get_rank(), layout.dtype, torch.device("cuda"))
        opt = bo.MasterAdamW(model.parameters(), lr=1e-5)
        taken = {}
        if hooks:
            def take(p):
                taken[p], p.grad = p.grad, None
            for p in model.parameters():
                p.register_post_accumulate_grad_hook(take)

        def step():
            for p, g in taken.items():
                p.grad = g
            taken.clear()
            opt.step()
            opt.zero_grad()
            sync()

        token = torch.zeros(1, device="cuda")
        sync = (lambda: dist.all_reduce(token)) if with_sync else (lambda: None)
        return marked(lambda x: bo.scaled_loss(model(x)), lambda loss: loss.backward(), sync), step
    return build


def skip_copies(transport) -> None:
    """Timing only, wrong sums: ``transport`` sets each bucket's shard (the kept slice of the
    gradient, or a new tensor) but copies nothing; the barrier and everything else stay."""
    def push_grads(bucket):
        kept = transport._direct[bucket.index].kept
        if kept is not None and bucket.grads[kept[0]] is not None:
            bucket.grad_shard = bucket.grads[kept[0]].view(-1)[kept[1]]
        else:
            bucket.grad_shard = bucket.new_shard()
    transport.push_grads = push_grads
    transport.push = lambda bucket, send: None  # ``_reduce`` made the shard before prep


def tz(copying_ranks=None, **options):
    """``copying_ranks``: with the copy engine, only these ranks copy (``skip_copies`` on the others)."""
    def build(model, args):
        opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True),
                            bucket_size=int(args.bucket), **options)
        if opt.sync.transport is not None:
            bo.OUTSIDE_ALLOCATOR.append(opt.sync.transport.nbytes)
            if copying_ranks is not None and dist.get_rank() not in copying_ranks:
                skip_copies(opt.sync.transport)
        return (marked(lambda x: bo.loss_of(model(x)), opt.backward, opt.finish_grad_sync),
                lambda: (opt.step(), opt.zero_grad()))
    return build


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--bucket", type=float, default=1e6)
    p.add_argument("--lead-ms", type=float, default=0.0)
    p.add_argument("--pad-ms", type=float, default=0.0, help="a GPU sleep after every step (the GPU rests, as on a power budget)")
    p.add_argument("--busy-ms", type=float, default=0.0, help="instead: this long of GEMMs after every step (the GPU keeps drawing power)")
    p.add_argument("--systems", default="floor,floor-sync,tz-ce-keep,tz-ce,tz-fused,floor@2",
                   help="NAME@k runs NAME again; keep-skel: no copies (timing only); keep-send0/1: only rank 0/1 copies")
    args = p.parse_args()
    rank, x = bo.join_ranks()
    args.lead_cycles = bo.sleep_cycles(args.lead_ms)
    args.rest_cycles = bo.sleep_cycles(args.pad_ms)
    clocks = Clocks(int(os.environ["LOCAL_RANK"]))
    keep = dict(reduce_transport="copy_engine", keep_grads_until_step=True)
    systems = {"floor": floor(), "floor-sync": floor(with_sync=True), "floor-views": floor(views=True),
               "floor-hooks": floor(hooks=True), "floor-symm": floor(symm=True), "tz-ce-keep": tz(**keep),
               "tz-ce": tz(reduce_transport="copy_engine"), "tz-fused": tz(),
               "keep-skel": tz(copying_ranks=(), **keep), "keep-send0": tz(copying_ranks=(0,), **keep),
               "keep-send1": tz(copying_ranks=(1,), **keep)}
    systems = [(name, systems[name.split("@")[0]]) for name in args.systems.split(",")]
    if args.busy_ms:
        systems = [(name, busy(build, args.busy_ms)) for name, build in systems]
    if rank == 0:
        print(f"bucket {args.bucket:.0e}, lead {args.lead_ms} ms, pad {args.pad_ms} ms, busy {args.busy_ms} ms, {args.steps} steps; ms, medians over steps")
        print(f"{'system':<12} {'total r0/r1':>13} {'forward r0/r1':>14} {'fwd+bwd r0/r1':>14} {'wait r0/r1':>11} "
              f"{'fwd+bwd r1-r0 med [p10,p90]':>28}  r0, r1: SM clock, power, share capped (NVML, timed steps)")
    for name, build in systems:
        MARKS.clear()
        HELD.clear()
        ISSUED.clear()
        with clocks:
            bo.run(name, build, x, args)
        timed = MARKS[args.warmup : args.warmup + args.steps]
        mine = [(s.elapsed_time(f), s.elapsed_time(b), b.elapsed_time(e)) for s, f, b, e in timed]
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, (mine, clocks.summary(since=ISSUED[args.warmup])))
        if rank == 0:
            (f0, b0, w0), (f1, b1, w1) = (list(zip(*r[0])) for r in every[:2])
            nvml = "  ".join(f"{c:.0f} MHz {w:.0f} W {cap:.2f}" for _, (c, w, cap) in every[:2])
            med = statistics.median
            d = sorted(q - p for p, q in zip(b0, b1))
            n = len(d)
            print(f"{name:<12} {med([a + b for a, b in zip(b0, w0)]):>6.2f}/{med([a + b for a, b in zip(b1, w1)]):<6.2f} "
                  f"{med(f0):>6.2f}/{med(f1):<6.2f} {med(b0):>7.2f}/{med(b1):<6.2f} {med(w0):>5.2f}/{med(w1):<5.2f} "
                  f"{d[n // 2]:>12.2f} [{d[n // 10]:.2f},{d[(9 * n) // 10]:.2f}]  {nvml}", flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
