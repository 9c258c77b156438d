"""Is it the coalesced work itself? gloo's plain ``allgather`` of two tensors per call (its work
then has two output lists and a List[List[Tensor]] future, as the coalesced one has) against
``allgather_into_tensor_coalesced`` of two pairs, 5 calls in flight at once, fp16, no tritonzero.

    python benchmarks/results/gloo_ag_plain_s20.py WORLD ROUNDS MODE   # MODE: L plain, K coalesced

Log: gloo_ag_plain_s20.log.
"""
import os, sys, time, tempfile
import torch, torch.distributed as dist, torch.multiprocessing as mp

def worker(rank, world, path, iters, mode):
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)
    pg = dist.group.WORLD
    chunks = []
    for c in range(5):
        n = 37 + 50 * c
        bufs = [torch.zeros(world * n, dtype=torch.float16) for _ in range(2)]
        chunks.append((bufs, [b[rank * n:(rank + 1) * n] for b in bufs]))
    n_of = {id(bufs[0]): shards[0].numel() for bufs, shards in chunks}
    bigs = {k: [torch.zeros(2 * world * n, dtype=torch.float16) for _ in range(2)] for k, n in n_of.items()}
    for it in range(iters):
        works = []
        for bufs, shards in chunks:
            for s in shards: s.fill_(rank + it % 5)
            if mode == "L":
                works.append(pg.allgather([list(b.chunk(2 * world)) for b in bigs[id(bufs[0])]], shards))
            else:
                works.append(pg.allgather_into_tensor_coalesced(bufs, shards))
        for w in works: w.wait()
    dist.destroy_process_group()

if __name__ == "__main__":
    world, iters, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.get_context("spawn")
        ps = [ctx.Process(target=worker, args=(r, world, f"{tmp}/s", iters, mode)) for r in range(world)]
        t = time.time()
        for p in ps: p.start()
        for p in ps: p.join()
        print(mode, "exitcodes", [p.exitcode for p in ps], f"{time.time()-t:.1f}s", flush=True)
