"""Checkpoints: bit-exact resume at the same world size, resharded resume at another, consolidation."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from conftest import cpu_only
from distributed import run_ranks
from equivalence import Net, full_masters
from tritonzero import ZeroOptimizer, checkpoint

pytestmark = cpu_only
BATCH = 12


def _setup(bucket_size: int, seed: int):
    torch.manual_seed(seed)
    model = Net().half()
    groups = [
        {"params": [p for n, p in model.named_parameters() if n.endswith("weight")], "weight_decay": 0.1},
        {"params": [p for n, p in model.named_parameters() if n.endswith("bias")], "weight_decay": 0.0},
    ]
    return model, ZeroOptimizer(model, torch.optim.AdamW(groups, lr=1e-2), bucket_size=bucket_size)


def _train(model, opt, steps: range):
    rank, world = dist.get_rank(), dist.get_world_size()
    local = BATCH // world
    for step in steps:
        gen = torch.Generator().manual_seed(step)
        x, y = torch.randn(BATCH, 17, generator=gen), torch.randn(BATCH, 7, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x[rank * local : (rank + 1) * local].half()).float(), y[rank * local : (rank + 1) * local])
        opt.backward(loss)
        opt.step()
        opt.zero_grad()


def _flat(model, opt) -> list[float]:
    masters = full_masters(opt)
    return torch.cat([masters[id(p)].reshape(-1) for p in model.parameters()]).tolist()


def _save_then_continue(path: str, bucket_size: int) -> dict:
    model, opt = _setup(bucket_size, seed=0)
    _train(model, opt, range(0, 2))
    checkpoint.save(path, model, opt)
    saved = _flat(model, opt)
    _train(model, opt, range(2, 4))
    return {"saved": saved, "continued": _flat(model, opt), "scale": opt.loss_scale,
            "params": torch.cat([p.detach().float().reshape(-1) for p in model.parameters()]).tolist()}


def _load_then_continue(path: str, bucket_size: int, resave: str | None = None) -> dict:
    model, opt = _setup(bucket_size, seed=1)  # different initial weights: all must come from the file
    checkpoint.load(path, model, opt)
    loaded = _flat(model, opt)
    masters = full_masters(opt)
    params_match = all(torch.equal(p.detach(), masters[id(p)].to(p.dtype)) for p in model.parameters())
    if resave:
        checkpoint.save(resave, model, opt)
    _train(model, opt, range(2, 4))
    return {"loaded": loaded, "continued": _flat(model, opt), "scale": opt.loss_scale, "params_match": params_match}


def _read_all(path: str) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint, whole, read in this process."""
    md = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    state = {k: torch.empty(m.size, dtype=m.properties.dtype) for k, m in md.items() if hasattr(m, "size")}
    dcp.load(state, checkpoint_id=path, no_dist=True)
    return state


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ckpt") / "step2")
    return path, run_ranks(2, _save_then_continue, path, 200)[0]


def test_same_world_size_resumes_bit_exact(saved):
    path, ref = saved
    for res in run_ranks(2, _load_then_continue, path, 200):
        assert res["loaded"] == ref["saved"]
        assert res["params_match"]
        assert res["continued"] == ref["continued"]  # bit-exact: same reductions, same order
        assert res["scale"] == ref["scale"]


@pytest.mark.parametrize("world_size,bucket_size", [(2, 350), (3, 200), (3, 350), (1, 10**6)])
def test_other_world_size_or_buckets_reshard_exactly(saved, tmp_path, world_size, bucket_size):
    """Loaded at another world size or bucket size, then saved again: every tensor (master
    weights, Adam moments, step counts, loss scale, metadata) comes back bit for bit."""
    path, ref = saved
    resave = str(tmp_path / "resaved")
    for res in run_ranks(world_size, _load_then_continue, path, bucket_size, resave):
        assert res["loaded"] == ref["saved"]
        assert res["params_match"]
    before, after = _read_all(path), _read_all(resave)
    assert set(before) == set(after)
    for key in before:
        assert torch.equal(before[key], after[key]), key


def test_consolidate(saved):
    path, ref = saved
    full = checkpoint.consolidate(path)
    model = Net().half()
    assert set(full) == set(model.state_dict())
    flat = torch.cat([full[n].reshape(-1) for n, _ in model.named_parameters()])
    assert flat.tolist() == ref["saved"]
    assert all(full[n].shape == p.shape for n, p in model.named_parameters())
    model.load_state_dict({k: v.half() for k, v in full.items()})  # loads into a plain model
