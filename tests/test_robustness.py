"""Frozen parameters, parameters switched off mid-training, the reduced shards' lifetime, a
rank failing mid-backward, and a dropped optimizer's memory."""

from __future__ import annotations

import gc
import threading
import weakref
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from conftest import cpu_only
from distributed import run_ranks
from tritonzero import ZeroOptimizer

pytestmark = cpu_only


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(9, 31), torch.nn.Tanh(), torch.nn.Linear(31, 5))


def _step(model, opt, seed):
    x = torch.randn(6, 9, generator=torch.Generator().manual_seed(seed))
    opt.backward(model(x).square().mean())
    opt.step()
    opt.zero_grad()


def _frozen_and_switched_off() -> dict:
    model = _mlp()
    model[0].requires_grad_(False)  # frozen before wrapping: not managed, never changes
    frozen = model[0].weight.detach().clone()
    opt = ZeroOptimizer(model, torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1), bucket_size=40)
    _step(model, opt, 0)
    unchanged = torch.equal(model[0].weight, frozen)

    # A managed parameter stops requiring grad: it gets no gradient, which counts as zero
    # (plain SGD: it stays put); no rank waits for it.
    model[2].bias.requires_grad_(False)
    bias = model[2].bias.detach().clone()
    _step(model, opt, 1)
    bias_kept = torch.equal(model[2].bias, bias)

    # A parameter frozen at construction starts requiring grad: a clear error, not silence.
    model[2].bias.requires_grad_(True)
    model[0].weight.requires_grad_(True)
    x = torch.randn(6, 9)
    opt.backward(model(x).square().mean())
    try:
        opt.step()
        error = ""
    except RuntimeError as e:
        error = str(e)
    return {"unchanged": unchanged, "bias_kept": bias_kept, "error": error}


@pytest.mark.parametrize("world_size", [1, 2])
def test_frozen_and_switched_off_parameters(world_size):
    for res in run_ranks(world_size, _frozen_and_switched_off):
        assert res["unchanged"] and res["bias_kept"]
        assert "frozen when the ZeroOptimizer was built" in res["error"]


def _shard_lifetime() -> dict:
    """Which buckets hold a reduced shard before backward, after the sync, and after the step."""
    model = _mlp()
    opt = ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), bucket_size=40)
    held = lambda: [b.grad_shard is not None for b in opt.buckets]  # noqa: E731
    seen = {"built": held()}
    opt.backward(model(torch.randn(6, 9)).square().mean())
    opt.finish_grad_sync()
    seen["synced"] = held()
    opt.step()
    seen["stepped"] = held()
    opt.zero_grad()
    return seen


@pytest.mark.parametrize("world_size", [1, 2])
def test_reduced_shards_live_from_sync_to_step(world_size):
    # Allocated per step, so they take no memory while the forward's activations are alive.
    for res in run_ranks(world_size, _shard_lifetime):
        assert len(res["synced"]) > 1
        assert not any(res["built"]) and all(res["synced"]) and not any(res["stepped"])


class _Boom(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("boom: a user error in backward")


def _dropped_optimizer(keep_model: bool) -> dict:
    model = _mlp()
    opt = ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), bucket_size=40, overlap_param_gather=True)
    _step(model, opt, 0)
    model(torch.randn(2, 9))  # the forward hooks wait for the all-gathers
    refs = [weakref.ref(opt), weakref.ref(opt.buckets[0].master)]
    if not keep_model:  # with the model kept, its parameters (views of the buffers) stay
        refs.append(weakref.ref(opt.buckets[0].param_buffer))
    del opt
    if not keep_model:
        del model
    gc.collect()  # the model's hooks and the optimizer form reference cycles
    if keep_model:
        model(torch.randn(2, 9)).square().mean().backward()  # the model runs on without the optimizer
    for _ in range(3):  # more optimizers built and dropped share the one comm thread
        other = _mlp()
        _step(other, ZeroOptimizer(other, torch.optim.SGD(other.parameters(), lr=0.1), bucket_size=40), 0)
    comm_threads = [t.name for t in threading.enumerate() if t.name.startswith("tritonzero-comm")]
    return {"freed": [r() is None for r in refs], "comm_threads": comm_threads}


@pytest.mark.parametrize("keep_model", [False, True], ids=["model-dropped", "model-kept"])
def test_dropped_optimizer_frees_its_buffers(keep_model):
    """Neither the comm thread (the last bucket it issued) nor the model's hooks may keep a
    dropped optimizer's buckets, fp32 masters included, alive."""
    for res in run_ranks(2, _dropped_optimizer, keep_model):
        assert all(res["freed"]), res
        assert res["comm_threads"] == ["tritonzero-comm-cpu"], res


def _two_optimizers(interleaved: bool) -> list[list[float]]:
    """Two models, each with its own optimizer, trained for three steps: one after the other,
    or with their backwards and steps interleaved, so that both optimizers' buckets queue on
    the one comm thread together. The first step's collectives must come after the second
    optimizer's reduce-scatters on every rank (``CommLauncher.drain``): without that, gloo
    aborts on a collective mismatch."""
    models = [_mlp(), torch.nn.Sequential(torch.nn.Linear(9, 17), torch.nn.GELU(), torch.nn.Linear(17, 5))]
    opts = [ZeroOptimizer(m, torch.optim.SGD(m.parameters(), lr=0.1), bucket_size=40) for m in models]
    x = [torch.randn(6, 9, generator=torch.Generator().manual_seed(dist.get_rank() * 10 + s)) for s in range(3)]
    if interleaved:
        for xs in x:
            for m, o in zip(models, opts):
                o.backward(m(xs).square().mean())
            for o in opts:
                o.step()
                o.zero_grad()
    else:
        for m, o in zip(models, opts):
            for xs in x:
                o.backward(m(xs).square().mean())
                o.step()
                o.zero_grad()
    return [[p.sum().item() for p in m.parameters()] for m in models]


def test_two_optimizers_share_the_comm_thread():
    # A collective mismatch between ranks shows as a native abort in gloo, which fails the test.
    apart = run_ranks(2, _two_optimizers, False)
    together = run_ranks(2, _two_optimizers, True)
    assert apart == together


def _one_rank_raises_mid_backward() -> dict:
    rank = dist.get_rank()
    # A short timeout, so a rank left waiting in a collective fails fast rather than hangs.
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=15))
    model = _mlp()
    opt = ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), bucket_size=40, process_group=group)
    _step(model, opt, 0)
    x = torch.randn(6, 9)
    try:
        h = model[0](x)
        if rank == 1:
            h = _Boom.apply(h)  # backward reaches this after the later layers' buckets launched
        opt.backward(model[2](torch.tanh(h)).square().mean())
        opt.step()
        return {"error": ""}
    except Exception as e:  # every rank must end up here, none may hang
        if rank == 1:
            dist.destroy_process_group(group)  # what a crashing process's exit does to its peers
        return {"error": f"{type(e).__name__}: {e}"}


def test_rank_failing_mid_backward_fails_every_rank():
    r0, r1 = run_ranks(2, _one_rank_raises_mid_backward)
    assert "boom" in r1["error"]
    assert "tritonzero: gradient sync failed" in r0["error"], r0
