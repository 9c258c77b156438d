"""One-off (session 11): where in an iteration each system reaches its peak (rank 0).

Hooks (forward pre/post on every module, post-accumulate-grad on every parameter) read the
allocator's peak and current bytes (host-side counters, no sync); when the peak has grown
since the previous hook, the interval (previous hook, this hook) is recorded."""
import os, sys, gc, torch, torch.distributed as dist
sys.path.insert(0, "benchmarks")
import bench_overlap as B

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)
MiB = 2**20
for name, builder in [("floor", lambda m: B.build_floor(m, None)), ("tz-fused 1e6", lambda m: B.build_tz(m, None, 1e6, fused=True)),
                      ("tz-fused 25e6", lambda m: B.build_tz(m, None, 25e6, fused=True)),
                      ("deepspeed 1e6", lambda m: B.build_deepspeed(m, None, 1e6)),
                      ("tz-fused 1e6", lambda m: B.build_tz(m, None, 1e6, fused=True))]:
    gc.collect(); torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    model = B.fresh_model()
    torch.cuda.reset_peak_memory_stats()
    fwd_bwd, step = builder(model)
    state = {"last": "start", "peak": 0, "it": 0, "log": []}
    def blocks(label):
        if rank != 0:
            return
        sizes = [b["size"] for seg in torch.cuda.memory_snapshot() for b in seg["blocks"] if b["state"] == "active_allocated"]
        big = sorted(sizes, reverse=True)[:8]
        print(f"   [{name}] {label}: allocated {(torch.cuda.memory_allocated() - before) / MiB:.1f} MiB in {len(sizes)} blocks; "
              f"largest MiB {[round(b / MiB, 1) for b in big]}; blocks >= 64 MiB: {sum(b for b in sizes if b >= 64 * MiB) / MiB:.0f} MiB", flush=True)
    def probe(label):
        m = torch.cuda.max_memory_allocated()
        if m > state["peak"]:
            state["log"].append((state["it"], state["last"], label, (m - before) / MiB, (torch.cuda.memory_allocated() - before) / MiB))
            state["peak"] = m
        state["last"] = label
    names = {mod: n or "model" for n, mod in model.named_modules()}
    for mod in model.modules():
        mod.register_forward_pre_hook(lambda m, a: probe("fwd> " + names[m]))
        mod.register_forward_hook(lambda m, a, o: probe("fwd< " + names[m]))
    for n, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, n=n: probe("grad " + n))
    for it in range(6):
        state["it"] = it
        probe(f"iter {it} start")
        if it in (1, 5):
            blocks(f"iter {it} start")
        fwd_bwd(x)
        probe(f"iter {it} after fwd_bwd_sync")
        step()
        probe(f"iter {it} after step")
    torch.cuda.synchronize()
    probe("end")
    if rank == 0:
        print(f"\n== {name}: peak {(torch.cuda.max_memory_allocated() - before) / 2**30:.5f} GiB above start; last increases:")
        for it, a, b, pk, cur in state["log"][-6:]:
            print(f"   it {it}: between [{a}] and [{b}]: peak {pk:.2f} MiB, allocated at [{b}] {cur:.2f} MiB")
    del model, fwd_bwd, step
dist.destroy_process_group()
