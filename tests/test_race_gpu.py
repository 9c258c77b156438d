"""Race stress on 2 GPUs (skipped with fewer): random delays on the comm and compute streams and
poisoned reuse of freed gradient memory must not change a single bit of the result."""

from __future__ import annotations

import random

import pytest
import torch

from distributed import run_ranks

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


def _train(stress: bool, bucket_size: int, steps: int = 8) -> list[float]:
    import tritonzero.bucket as tzb
    from tritonzero import ZeroOptimizer

    torch.manual_seed(0)
    with torch.device("cuda"):
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(6)]).half()
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=1e-3), bucket_size=bucket_size)
    rng = random.Random(1234 + torch.distributed.get_rank())
    real = tzb.reduce_scatter
    hooks = []
    if stress:
        def slow_reduce_scatter(out, inp, group, average=False):
            torch.cuda._sleep(rng.randrange(0, 2_000_000))  # comm stream: up to ~1 ms late
            return real(out, inp, group, average)

        tzb.reduce_scatter = slow_reduce_scatter
        for layer in model:
            hooks.append(layer.register_forward_pre_hook(lambda m, a: torch.cuda._sleep(rng.randrange(0, 1_000_000))))
        def poison(param):
            # After tritonzero's hook drops the gradient: grab freed memory and fill it with NaN.
            torch.full((1024, 1024), float("nan"), device="cuda", dtype=torch.half)

        for p in model.parameters():
            hooks.append(p.register_post_accumulate_grad_hook(poison))
    for step in range(steps):
        gen = torch.Generator(device="cuda").manual_seed(step)
        x = torch.randn(4096, 1024, device="cuda", dtype=torch.half, generator=gen)
        opt.backward(model(x).float().square().mean())
        if stress:
            torch.cuda._sleep(rng.randrange(0, 1_000_000))  # compute stream, before the sync
        opt.step()
        opt.zero_grad()
    tzb.reduce_scatter = real
    for h in hooks:
        h.remove()
    return torch.cat([p.detach().float().reshape(-1) for p in model.parameters()]).tolist()


def _both(bucket_size: int) -> dict:
    return {"calm": _train(False, bucket_size), "stressed": _train(True, bucket_size)}


# 1.1M elements: buckets of a weight and a bias, prepped into a bucket buffer. 1M: each weight
# (1024 * 1024) is larger than a bucket and reduces in place from its own gradient.
@pytest.mark.parametrize("bucket_size", [1_100_000, 1_000_000], ids=["bucket-buffers", "in-place"])
def test_delays_and_poison_change_nothing(bucket_size):
    for res in run_ranks(2, _both, bucket_size, backend="nccl"):
        calm, stressed = torch.tensor(res["calm"]), torch.tensor(res["stressed"])
        assert torch.isfinite(calm).all()
        assert torch.equal(calm, stressed), (calm - stressed).abs().max()
