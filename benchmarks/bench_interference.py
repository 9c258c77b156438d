"""What overlapped communication costs the compute beside it (one process, 2 GPUs).

    python benchmarks/bench_interference.py

GPU 0 runs bench_overlap's model (fwd+bwd, loss x 2^16). As soon as forward ends, a
high-priority side stream on GPU 0 moves one step's gradient traffic (the model's 403M fp16
gradients, 16 chunks) by one of:

- ``nccl``: reduce-scatter between GPU 0 and GPU 1 (``torch.cuda.nccl``). GPU 1 does nothing
  else, so NCCL's kernels never wait for their peer: a lower bound of what they hold.
- ``ce``: the half GPU 0 receives in that reduce-scatter, pulled from GPU 1 by peer copies
  (copy engines, no SMs).
- ``ce+add``: those copies plus the local add that completes a reduce-scatter (an SM kernel).
- ``prep-like``: read every gradient and write a bucket (an SM kernel, the prep's traffic).
- ``memcpy``: the same bytes moved by ``cudaMemcpyAsync`` device to device (what a gather
  without scaling could use, the scaling left to the collective).

It prints the compute stream's fwd+bwd time (median of 10) against ``none``, and how long the
side stream took. The gap between ``nccl`` and ``ce+add`` is what a copy-engine reduce-scatter
could win back.
"""

from __future__ import annotations

import statistics

import torch

from bench_overlap import fresh_model, loss_of

CHUNKS = 16


def main() -> None:
    torch.cuda.set_device(0)
    model = fresh_model()
    x = torch.randn(4, 1024, 2048, device="cuda:0", dtype=torch.float16)
    per = sum(p.numel() for p in model.parameters()) // CHUNKS // 128 * 128
    half = per // 2
    side0, side1 = torch.cuda.Stream(0, priority=-1), torch.cuda.Stream(1, priority=-1)
    grads0 = torch.randn(CHUNKS, per, device="cuda:0", dtype=torch.float16)
    grads1 = torch.randn(CHUNKS, per, device="cuda:1", dtype=torch.float16)
    shard0 = torch.empty(CHUNKS, half, device="cuda:0", dtype=torch.float16)
    shard1 = torch.empty(CHUNKS, half, device="cuda:1", dtype=torch.float16)
    received = torch.empty(CHUNKS, half, device="cuda:0", dtype=torch.float16)
    bucket = torch.empty(CHUNKS, per, device="cuda:0", dtype=torch.float16)

    def comm(mode: str) -> None:  # on side0 (current stream of GPU 0)
        for c in range(CHUNKS):
            if mode == "nccl":
                torch.cuda.nccl.reduce_scatter([grads0[c], grads1[c]], [shard0[c], shard1[c]], streams=[side0, side1])
            elif mode in ("ce", "ce+add"):
                # Cross-device copy_: torch issues a peer memcpy (copy engine) on the source
                # device's current stream, ordered after and before GPU 0's current stream (side0).
                # GPU 1's current stream must not be its legacy default stream, which would
                # serialise the copy with other work.
                with torch.cuda.stream(side1):
                    received[c].copy_(grads1[c, :half])
                if mode == "ce+add":
                    torch.add(grads0[c, :half], received[c], out=shard0[c])
            elif mode == "prep-like":
                torch.mul(grads0[c], 0.5, out=bucket[c])
            elif mode == "memcpy":
                bucket[c].copy_(grads0[c])  # same dtype, contiguous: one cudaMemcpyAsync

    rows = []
    for mode in ["none", "nccl", "ce", "ce+add", "prep-like", "memcpy", "none"]:
        compute, span = [], []
        for i in range(13):
            e0, ef, e1, es = (torch.cuda.Event(enable_timing=True) for _ in range(4))
            e0.record()
            loss = loss_of(model(x)) * 2.0**16
            ef.record()
            side0.wait_event(ef)
            with torch.cuda.stream(side0):
                comm(mode)
                es.record()
            loss.backward()
            e1.record()
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)
            model.zero_grad(set_to_none=True)
            if i >= 3:
                compute.append(e0.elapsed_time(e1))
                span.append(ef.elapsed_time(es))
        rows.append((mode, statistics.median(compute), statistics.median(span)))
    base = statistics.mean(r[1] for r in rows if r[0] == "none")
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; {CHUNKS} chunks of {per:,} fp16 elements")
    print(f"{'side stream':<10} {'fwd+bwd ms':>10} {'+ms':>6} {'side ms':>8}")
    for mode, ms, side in rows:
        print(f"{mode:<10} {ms:>10.2f} {ms - base:>6.2f} {side:>8.2f}")


if __name__ == "__main__":
    main()
