"""End-to-end: fwd+bwd+grad sync, full step and peak memory of a GPT-style fp16 stack on 2 GPUs.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node 2 benchmarks/bench_overlap.py [--systems floor,collectives,tz,ddp,fsdp2,deepspeed]

tritonzero's systems: ``tz`` (foreach AdamW), ``tz-fused`` (fused AdamW), ``tz-ce`` (fused AdamW,
``reduce_transport="copy_engine"``), ``tz-ce-keep`` (the same, ``keep_grads_until_step=True``),
``tz-overlap`` (fused, all-gathers behind the next forward) and ``tz-trace`` /
``tz-overlap-trace`` (with a timeline). ``floor-sync`` is the floor plus a
one-element all-reduce after backward and after the step: the cost of being synchronous alone
(each step waits for the slower rank), with no bytes moved. ``floor-shard-sync`` also steps only
1 / world size of the parameters, as a ZeRO-2 rank does: an ideal ZeRO-2 whose communication
costs nothing (its shorter step matters on a power-capped GPU, see below).

Model: 8 pre-norm transformer blocks, d=2048 (about 403M parameters), fp16, input 4 x 1024 tokens
per GPU, AdamW (fp32 master weights and a scaled loss for every system, see ``MasterAdamW``).
Systems run one after another in this process; each is timed with CUDA events over ``--steps``
steps after ``--warmup`` steps, and rank 0 prints each system's medians as soon as it is done
(and every rank's fwd+bwd+sync median; the JSON rows hold every rank's steps). ``--rounds R``
runs the whole list R times, round-robin, and ends with a table pooled over the rounds, so that
drift over a run hits every system alike (over the socket transport two identical tritonzero
systems, 1e6 and 4e6 buckets, have differed by up to 11% in one pass). The host waits for
the GPU at every step's start; ``--lead-ms L`` lets it run L ms ahead instead (a GPU sleep before
the timed window), as in a loop that does not sync every step.
On a power-capped GPU (the H200s measured: 700 W, reached during fwd+bwd) the SM clock depends
on what the GPU did just before, and a system whose step is shorter runs its next fwd+bwd at a
lower clock (on one GPU with no communication, halving the floor's step made its fwd+bwd 2-3%
slower: RESULTS.md, nineteenth session). ``--rest-ms R`` puts an R ms GPU sleep after
every step (iteration times include it), so that every system starts fwd+bwd rested.
Peak memory is torch's allocator peak, plus the receive slots of tritonzero's copy-engine
transport (``tz-ce``), which live outside that allocator.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tritonzero import ZeroOptimizer


class Block(torch.nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Stack(torch.nn.Module):
    def __init__(self, d: int = 2048, layers: int = 8, heads: int = 16):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


def loss_of(out: torch.Tensor) -> torch.Tensor:
    return out.float().square().mean()


TRACED = []  # (bucket size, Timeline) of the traced tritonzero runs
OUTSIDE_ALLOCATOR = []  # bytes a system holds outside torch's caching allocator (copy-engine slots)

# The baselines train the way fp16 models are trained: the loss times a scale (tritonzero's and
# DeepSpeed's initial dynamic scale) and an fp32 copy of the weights for the optimizer. AdamW
# stepped on the fp16 parameters themselves turns them into NaNs within a step (its eps and the
# squared gradients underflow in fp16), and GEMMs on NaNs run ~13% faster than on real data,
# which made such a baseline look faster than it is.
LOSS_SCALE = 2.0**16


class MasterAdamW:
    """AdamW over fp32 master copies of fp16 parameters: unscale, step, copy back."""

    def __init__(self, params, lr: float):
        self.params = [p for p in params if p.requires_grad]
        self.master = [p.detach().float() for p in self.params]
        self.opt = torch.optim.AdamW(self.master, lr=lr, fused=True)  # the fastest torch step

    def step(self):
        for m, p in zip(self.master, self.params):
            m.grad = p.grad.float()
        torch._foreach_mul_([m.grad for m in self.master], 1.0 / LOSS_SCALE)
        self.opt.step()
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.master)

    def zero_grad(self):
        for t in self.params + self.master:
            t.grad = None


def scaled_loss(out: torch.Tensor) -> torch.Tensor:
    return loss_of(out) * LOSS_SCALE


def share_of(params: list, fraction: float) -> list:
    """The first of ``params``, in order, up to where they hold ``fraction`` of all elements."""
    total, held = sum(p.numel() for p in params), 0
    for i, p in enumerate(params):
        held += p.numel()
        if held >= fraction * total:
            return params[: i + 1]
    return params


# Each builder returns (fwd_bwd_sync(x), step()) closures over a fresh copy of the model.
def build_floor(model, args, share: float = 1.0):
    """The one-GPU floor. ``share`` < 1: AdamW over only that share of the parameters (a ZeRO-2
    rank's step, as long as one), every gradient dropped after it."""
    params = list(model.parameters())
    stepped = share_of(params, share)
    opt = MasterAdamW(stepped, lr=1e-5)
    rest = params[len(stepped):]

    def step():
        opt.step()
        opt.zero_grad()
        for p in rest:
            p.grad = None
    return (lambda x: scaled_loss(model(x)).backward()), step


def build_floor_sync(model, args, share: float = 1.0):
    """The floor plus the two rendezvous of a synchronous data-parallel step (a one-element
    all-reduce after backward and after the step), no bytes: what waiting for the slower rank
    alone costs. With ``share`` = 1 / world size (``floor-shard-sync``) the step is also as short
    as a ZeRO-2 rank's, which on a power-capped GPU slows the next fwd+bwd (RESULTS.md,
    nineteenth session): the best a synchronous ZeRO-2 could do here if its bytes cost nothing."""
    fwd_bwd, step = build_floor(model, args, share)
    token = torch.zeros(1, device=next(model.parameters()).device)
    return (lambda x: (fwd_bwd(x), dist.all_reduce(token))), (lambda: (step(), dist.all_reduce(token)))


def build_tz(model, args, bucket, trace=False, fused=False, overlap=False, loss=None, **options):
    """``loss(model, x)``: the loss backward starts from (default: the model's forward)."""
    loss = loss or (lambda m, x: loss_of(m(x)))
    inner = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=fused)
    opt = ZeroOptimizer(model, inner, bucket_size=int(bucket), trace=trace, overlap_param_gather=overlap, **options)
    if trace:
        TRACED.append((bucket, opt.timeline))
    if opt.sync.transport is not None:
        OUTSIDE_ALLOCATOR.append(opt.sync.transport.nbytes)

    def fwd_bwd(x):
        opt.backward(loss(model, x))
        opt.finish_grad_sync()

    return fwd_bwd, (lambda: (opt.step(), opt.zero_grad()))


def build_ddp(model, args, bucket):
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=bucket * 2 / 2**20, gradient_as_bucket_view=True, device_ids=[torch.cuda.current_device()]
    )
    opt = MasterAdamW(ddp.parameters(), lr=1e-5)
    return (lambda x: scaled_loss(ddp(x)).backward()), (lambda: (opt.step(), opt.zero_grad()))


def build_fsdp2(model, args):
    """fp32 sharded parameters (the master copy), fp16 compute and fp16 reduce-scatter."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model.float()
    policy = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float16)
    for blk in model.blocks:
        fully_shard(blk, reshard_after_forward=False, mp_policy=policy)
    fully_shard(model, reshard_after_forward=False, mp_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step():
        torch._foreach_mul_([p.grad.to_local() for p in model.parameters()], 1.0 / LOSS_SCALE)
        opt.step()
        opt.zero_grad()

    return (lambda x: scaled_loss(model(x)).backward()), step


def build_deepspeed(model, args, bucket):
    import deepspeed

    cfg = {
        "train_micro_batch_size_per_gpu": 4,
        "fp16": {"enabled": True},
        "zero_optimization": {"stage": 2, "overlap_comm": True, "contiguous_gradients": True,
                              "reduce_bucket_size": int(bucket), "allgather_bucket_size": int(bucket)},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-5, "torch_adam": True}},
    }
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
    return (lambda x: engine.backward(loss_of(engine(x)))), engine.step


def fresh_model() -> Stack:
    torch.manual_seed(0)
    with torch.device("cuda"):
        return Stack().half()


COMM_FLOOR = "RS + AG alone (comm floor)"


def collectives_alone(x, args, chunk: int | list[int] = 25_000_000, op=dist.ReduceOp.SUM, group=None):
    """The comm floor of ZeRO-2: reduce-scatter every gradient and all-gather every parameter
    (fp16, ``chunk``-element buckets), nothing else running. fwd_bwd_sync_ms holds the
    reduce-scatter time, step_ms reduce-scatter + all-gather, both scaled to the model's
    element count. ``chunk`` may also list the buckets' sizes (multiples of the world size),
    e.g. a tritonzero layout's. ``op`` and ``group``: the reduce-scatters' (e.g.
    ``dist._make_nccl_premul_sum(0.5)``, a high-priority group)."""
    world = dist.get_world_size()
    n = sum(p.numel() for p in fresh_model().parameters())
    if isinstance(chunk, int):
        size = chunk // world * world
        chunk = [size] * (n // size)
    rows = torch.randn(sum(chunk), device="cuda", dtype=torch.float16).split(chunk)
    shards = [torch.empty(c // world, device="cuda", dtype=torch.float16) for c in chunk]
    rs, both = [], []
    for i in range(args.warmup + args.steps):
        e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        e0.record()
        for row, out in zip(rows, shards):
            dist.reduce_scatter_tensor(out, row, op=op, group=group)
        e1.record()
        for row, out in zip(rows, shards):
            dist.all_gather_into_tensor(row, out, group=group)
        e2.record()
        e2.synchronize()
        if i >= args.warmup:
            rs.append(e0.elapsed_time(e1) * n / sum(chunk))
            both.append(e0.elapsed_time(e2) * n / sum(chunk))
    return {"system": COMM_FLOOR, "fwd_bwd_sync_ms": statistics.median(rs),
            "step_ms": statistics.median(both), "peak_gib": float("nan"),
            "steps": {"fwd_bwd_sync_ms": rs, "step_ms": both}}


class SystemUnavailable(Exception):
    """A system's builder failed (on every rank: same code, same packages); the run goes on."""


def join_ranks() -> tuple[int, torch.Tensor]:
    """Under torchrun: join the NCCL process group on this process's GPU; returns this rank and
    the input batch every benchmark feeds the model (4 x 1024 tokens of width 2048)."""
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    return dist.get_rank(), torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)


def sleep_cycles(ms: float) -> int:
    """The ``torch.cuda._sleep`` argument that keeps this GPU busy for ``ms`` milliseconds,
    measured on it (0 for 0 ms, measuring nothing)."""
    if not ms:
        return 0
    torch.cuda._sleep(1000)  # the first launch loads the kernel
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    torch.cuda._sleep(10**8)
    e1.record()
    e1.synchronize()
    return int(ms * 10**8 / e0.elapsed_time(e1))


def run(name, builder, x, args):
    gc.collect()  # the previous system's optimizer and hooks form reference cycles
    torch.cuda.empty_cache()
    # Peak memory counts from here: whatever earlier systems left allocated is subtracted.
    before = torch.cuda.memory_allocated()
    model = fresh_model()
    torch.cuda.reset_peak_memory_stats()
    try:
        fwd_bwd, step = builder(model, args)
    except Exception as e:  # a system that cannot be built (a missing package) fails on every rank alike
        raise SystemUnavailable(f"{type(e).__name__}: {e}") from e
    sync_ms, step_ms, iter_ms = [], [], []
    previous = None
    for i in range(args.warmup + args.steps + 1):
        e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        e0.record()
        if previous is not None:
            # Iteration: one step's start to the next's, so work a step leaves running (the
            # overlapped all-gather) and host gaps between steps count too. elapsed_time raises
            # unless both events have completed, and the GPU reaches e0 some microseconds after
            # it is recorded: wait for e0 itself (waiting for ``previous`` alone raced, on one
            # rank at a time, which then left its peer waiting in a collective).
            e0.synchronize()
            iter_ms.append(previous.elapsed_time(e0))
        if i == args.warmup + args.steps:
            break
        start = e0
        if args.lead_cycles:
            # The GPU sleeps while the host issues the step, as in a loop that does not sync
            # every step; timing starts when the sleep ends.
            torch.cuda._sleep(args.lead_cycles)
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        fwd_bwd(x)
        e1.record()
        step()
        e2.record()
        if args.rest_cycles:
            torch.cuda._sleep(args.rest_cycles)  # after the step's window, inside the iteration's
        previous = None
        if i >= args.warmup:
            e2.synchronize()
            sync_ms.append(start.elapsed_time(e1))
            step_ms.append(start.elapsed_time(e2))
            previous = start
    torch.cuda.synchronize()
    per_rank = [None] * dist.get_world_size()  # a synchronous system runs at its slowest rank's pace
    dist.all_gather_object(per_rank, sync_ms)
    finite = all(bool(torch.isfinite(p.to_local() if hasattr(p, "to_local") else p).all()) for p in model.parameters())
    row = {"system": name, "finite": finite, "fwd_bwd_sync_ms": statistics.median(sync_ms),
           "fwd_bwd_sync_steps_per_rank": per_rank,
           "step_ms": statistics.median(step_ms),
           "iteration_ms": statistics.median(iter_ms),
           "peak_gib": (torch.cuda.max_memory_allocated() - before + sum(OUTSIDE_ALLOCATOR)) / 2**30,
           "steps": {"fwd_bwd_sync_ms": sync_ms, "step_ms": step_ms, "iteration_ms": iter_ms}}
    OUTSIDE_ALLOCATOR.clear()
    del model, fwd_bwd, step
    return row


def print_row(r: dict, floor: dict | None) -> None:
    if "error" in r:
        print(f"{r['system']:<26} ERROR {r['error']}", flush=True)
        return
    ratio = {k: r.get(k, float("nan")) / floor[k] if floor else float("nan") for k in ("fwd_bwd_sync_ms", "step_ms", "iteration_ms")}
    print(f"{r['system']:<26} {r['fwd_bwd_sync_ms']:>15.1f} {ratio['fwd_bwd_sync_ms']:>7.2f} {r['step_ms']:>8.1f} "
          f"{ratio['step_ms']:>7.2f} {r.get('iteration_ms', float('nan')):>8.1f} {ratio['iteration_ms']:>7.2f} {r['peak_gib']:>8.2f}"
          + ("  " + "/".join(f"{statistics.median(ms):.2f}" for ms in r["fwd_bwd_sync_steps_per_rank"])
             if "fwd_bwd_sync_steps_per_rank" in r else "")
          + ("  rounds " + " ".join(f"{ms:.1f}" for ms in r["round_medians"]) if "round_medians" in r else "")
          + ("" if r.get("finite", True) else "  NON-FINITE PARAMETERS"), flush=True)


def pooled(rows: list[dict]) -> list[dict]:
    """One row per system over every round of ``--rounds``: medians of all its steps (this
    rank's), the highest peak, and each round's fwd+bwd+sync median in ``round_medians``."""
    by_system: dict[str, list[dict]] = {}
    for r in rows:
        if "error" not in r:
            by_system.setdefault(r["system"], []).append(r)
    table = []
    for system, runs in by_system.items():
        row = {"system": system, "round": "all", "finite": all(r.get("finite", True) for r in runs),
               "peak_gib": max(r["peak_gib"] for r in runs), "round_medians": [r["fwd_bwd_sync_ms"] for r in runs]}
        row.update({k: statistics.median([v for r in runs for v in r["steps"][k]]) for k in runs[0]["steps"]})
        table.append(row)
    return table


def print_pooled(table: list[dict]) -> None:
    """``pooled``'s rows against the floor, and against the comm floor when it ran (socket runs)."""
    floor = next((r for r in table if r["system"].startswith("floor")), None)
    comm = next((r for r in table if r["system"] == COMM_FLOOR), None)
    print(f"\npooled over {len(table[0]['round_medians'])} rounds (all steps of every round; per-round fwd+bwd+sync medians last)")
    for r in table:
        print_row(r, floor)
        if comm is not None and r is not comm and r is not floor:
            print(f"{'':<26} x RS alone {r['fwd_bwd_sync_ms'] / comm['fwd_bwd_sync_ms']:.3f}, "
                  f"step x RS + AG alone {r['step_ms'] / comm['step_ms']:.3f}", flush=True)


def plan_systems(systems: str, buckets: list[float], step_chunks: str | None = None) -> list[tuple[str, object]]:
    """(row name, builder) per system and bucket size; ``step_chunks`` ("1,2,4") repeats each
    tritonzero system once per value. The builder of "collectives" is None."""
    plan = []
    for s in systems.split(","):
        if s == "floor":
            plan.append(("floor (1 GPU, no sync)", build_floor))
        elif s == "floor-sync":
            plan.append(("floor + 2 rendezvous", build_floor_sync))
        elif s == "floor-shard-sync":
            plan.append(("floor, shard step + 2 rdv", lambda m, a: build_floor_sync(m, a, share=1 / dist.get_world_size())))
        elif s == "collectives":
            plan.append(("collectives", None))
        elif s == "fsdp2":
            plan.append(("fsdp2 per block", build_fsdp2))
        else:
            builder = {"tz": build_tz, "ddp": build_ddp, "deepspeed": build_deepspeed,
                       "tz-trace": lambda m, a, b, **o: build_tz(m, a, b, trace=True, **o),
                       "tz-fused": lambda m, a, b, **o: build_tz(m, a, b, fused=True, **o),
                       "tz-ce": lambda m, a, b, **o: build_tz(m, a, b, fused=True, reduce_transport="copy_engine", **o),
                       "tz-ce-keep": lambda m, a, b, **o: build_tz(
                           m, a, b, fused=True, reduce_transport="copy_engine", keep_grads_until_step=True, **o),
                       "tz-overlap": lambda m, a, b, **o: build_tz(m, a, b, fused=True, overlap=True, **o),
                       "tz-overlap-trace": lambda m, a, b, **o: build_tz(m, a, b, fused=True, overlap=True, trace=True, **o)}[s]
            variants = [("", {})]
            if s.startswith("tz") and step_chunks:
                variants = [(f" K={k}", {"step_chunks": int(k)}) for k in step_chunks.split(",")]
            plan += [(f"{s} {b:.3g}{label}", lambda m, a, b=b, f=builder, o=o: f(m, a, b, **o)) for b in buckets for label, o in variants]
    return plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--systems", default="floor,collectives,tz,ddp,fsdp2")
    parser.add_argument("--buckets", default="1e6,25e6,1e8")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--out", default=None, help="write rows as JSON here (rank 0)")
    parser.add_argument("--trace-dir", default=None, help="write the tz-trace systems' timelines here")
    parser.add_argument("--lead-ms", type=float, default=0.0,
                        help="let the host run this far ahead of the GPU at each step's start (a GPU sleep before the timed window)")
    parser.add_argument("--rest-ms", type=float, default=0.0,
                        help="a GPU sleep after every step: each fwd+bwd starts on a rested GPU (see the module doc)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every system this many times, round-robin, against drift; then a pooled table "
                             "(JSON rows get \"round\": 0, 1, ... and the pooled ones \"all\")")
    parser.add_argument("--step-chunks", default=None, help="tritonzero systems once per value, e.g. 1,2,4 (default: its default)")
    args = parser.parse_args()
    rank, x = join_ranks()
    nparams = sum(p.numel() for p in fresh_model().parameters())
    args.lead_cycles = sleep_cycles(args.lead_ms)
    args.rest_cycles = sleep_cycles(args.rest_ms)
    plan = plan_systems(args.systems, [float(b) for b in args.buckets.split(",")], args.step_chunks)
    if rank == 0:
        print(f"\n{nparams / 1e6:.0f}M params, torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
              f"{torch.cuda.get_device_name()}, transport {'socket' if os.environ.get('NCCL_P2P_DISABLE') == '1' else 'default'}")
        print(f"{'system':<26} {'fwd+bwd+sync ms':>15} {'x floor':>7} {'step ms':>8} {'x floor':>7} {'iter ms':>8} {'x floor':>7} {'peak GiB':>8}  fwd+bwd+sync per rank",
              flush=True)
    rows = []
    for round_ in range(args.rounds):
        this_round = []
        for name, builder in plan:
            try:
                row = collectives_alone(x, args) if builder is None else run(name, builder, x, args)
            except SystemUnavailable as e:  # report and go on to the next system
                row = {"system": name, "error": str(e)[:200]}
            # Any other error ends the run: it may have struck one rank only, mid-step, and the
            # others would wait for its collectives forever.
            dist.barrier()
            this_round.append({**row, "round": round_})
            rows.append(this_round[-1])
            if rank == 0:  # row by row, so a run cut short keeps what it measured
                floor = next((r for r in this_round if r["system"].startswith("floor") and "error" not in r), None)
                print_row(rows[-1], floor)
                if args.out:
                    with open(args.out, "w") as f:
                        json.dump(rows, f, indent=1)
    if rank == 0 and args.rounds > 1:
        table = pooled(rows)
        print_pooled(table)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(rows + table, f, indent=1)
    if rank == 0:
        for bucket, timeline in TRACED:
            exposed = timeline.exposed_comm_ms()
            print(f"tz {bucket:.0e} traced: exposed comm per step {statistics.median(exposed):.2f} ms (median of {len(exposed)})")
            if args.trace_dir:
                timeline.export_chrome(f"{args.trace_dir}/timeline_{int(bucket)}.json")
                timeline.plot(f"{args.trace_dir}/timeline_{int(bucket)}.png", f"tritonzero, bucket {bucket:.0e} elements, 2 x H200")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
