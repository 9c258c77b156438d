"""gloo's coalesced all-gather, several in flight at once (ParamGather's CPU pattern before the
twentieth session): torch and gloo alone, except mode T.

    python benchmarks/results/gloo_ag_stress_s20.py WORLD ROUNDS MODE SEED

Each rank holds NCHUNKS chunks (default 5) of 1-3 buckets (NBUCKETS fixes it) of DTYPE (default
float16), odd sizes; a bucket's shard is its rank's slice of its buffer, as in tritonzero. Each
round steps every chunk's fp32 masters, copies them into the shards and all-gathers the chunk;
the waits come after the last chunk. Modes:
    A  one allgather_into_tensor_coalesced per chunk, all in flight together
    D  A with the main thread idle between issues
    B  A, each waited for at once (one in flight)
    C  one _allgather_base per bucket, all in flight together
    R  one _reduce_scatter_base per bucket, all in flight together
    T  tritonzero.collectives.all_gather_coalesced per chunk, all in flight together
Every 100 rounds each rank checks its own shards of chunk 0. Prints each rank's exit code.
"""
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp

def worker(rank, world, path, iters, mode, seed):
    nchunks = int(os.environ.get("NCHUNKS", 5)); nb = int(os.environ.get("NBUCKETS", 0))
    dtype = getattr(torch, os.environ.get("DTYPE", "float16"))
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)
    pg = dist.distributed_c10d._get_default_group()
    g = torch.Generator().manual_seed(seed)
    chunks = []
    for c in range(nchunks):
        bk = []
        for b in range(nb or 1 + c % 3):
            s = int(torch.randint(17, 400, (1,), generator=g))
            buf = torch.zeros(world * s, dtype=dtype)
            shard = buf[rank * s:(rank + 1) * s]
            master = torch.randn(s, generator=g)
            bk.append((buf, shard, master, s))
        chunks.append(bk)
    for it in range(iters):
        works = []
        for c, bk in enumerate(chunks):
            masters = [m for _, _, m, _ in bk]
            if mode != "D":  # D: the main thread does nothing between issues
                torch._foreach_mul_(masters, 0.999)
                torch._foreach_add_(masters, [torch.full_like(m, 0.001 * (rank + 1)) for m in masters])
            torch._foreach_copy_([sh for _, sh, _, _ in bk], masters)
            if mode in ("A", "B", "D"):
                ws = [pg.allgather_into_tensor_coalesced([b for b, _, _, _ in bk], [sh for _, sh, _, _ in bk])]
            elif mode == "T":  # tritonzero's all_gather_coalesced
                from tritonzero.collectives import all_gather_coalesced
                ws = [all_gather_coalesced([b for b, _, _, _ in bk], [sh for _, sh, _, _ in bk], pg)]
            elif mode == "C":  # one _allgather_base per bucket, all in flight
                ws = [pg._allgather_base(b, sh) for b, sh, _, _ in bk]
            elif mode == "R":  # reduce-scatters in flight (the grad path's collective)
                ws = [pg._reduce_scatter_base(sh.float(), b.float()) for b, sh, _, _ in bk]
            if mode == "B":
                for w in ws: w.wait()
            else:
                works.extend(ws)
        for w in works:
            w.wait()
        if it % 100 == 0 and mode != "R":
            for buf, sh, m, s in chunks[0]:
                assert torch.equal(buf[rank * s:(rank + 1) * s], m.to(dtype))
    dist.destroy_process_group()

if __name__ == "__main__":
    world, iters, mode, seed = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    path = f"/tmp/agstore_{os.getpid()}"
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=worker, args=(r, world, path, iters, mode, seed)) for r in range(world)]
    t = time.time()
    for p in ps: p.start()
    for p in ps: p.join()
    print("exitcodes", [p.exitcode for p in ps], f"{time.time()-t:.1f}s", flush=True)
    sys.exit(0 if all(p.exitcode == 0 for p in ps) else 1)
