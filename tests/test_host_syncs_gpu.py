"""Host syncs per step on one GPU (skipped without CUDA): none with a fused optimizer, one without."""

from __future__ import annotations

import warnings

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("fused,expected", [(True, 0), (False, 1)])
def test_host_syncs_per_step(fused, expected):
    from tritonzero import ZeroOptimizer

    with torch.device("cuda"):
        model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).half()
    opt = ZeroOptimizer(model, torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused), bucket_size=100_000)
    x = torch.randn(64, 512, device="cuda", dtype=torch.half)
    counts = []
    for i in range(4):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            opt.backward(model(x).float().square().mean())
            opt.clip_grad_norm_(1.0)
            opt.step()
            opt.zero_grad()
            torch.cuda.set_sync_debug_mode("default")
        syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
        if i > 0:  # the first step builds pointer tables and optimizer state
            counts.append(len(syncs))
    print(f"fused={fused}: host syncs per step {counts}")
    assert counts == [expected] * 3, [str(w.message) for w in syncs]
