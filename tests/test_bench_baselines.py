"""The end-to-end benchmark's baselines must train on real numbers.

AdamW stepped directly on fp16 weights turns them into NaNs (the squared gradients and eps
underflow), and GEMMs on NaNs run faster than on real data, so such a baseline looks faster than
it is. These tests pin down both the trap and the benchmark's way around it (``MasterAdamW``).
"""

from __future__ import annotations

import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_overlap  # noqa: E402


def _small_model() -> bench_overlap.Stack:
    torch.manual_seed(0)
    return bench_overlap.Stack(d=64, layers=2, heads=4).half()


def _nonfinite_fraction(model: torch.nn.Module) -> float:
    flat = torch.cat([p.detach().float().flatten() for p in model.parameters()])
    return (~torch.isfinite(flat)).float().mean().item()


def test_plain_adamw_on_fp16_weights_turns_them_into_nans():
    model = _small_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    x = torch.randn(2, 17, 64, dtype=torch.float16)
    bench_overlap.loss_of(model(x)).backward()
    opt.step()
    assert _nonfinite_fraction(model) > 0.5


def test_floor_baseline_trains_on_finite_weights():
    model = _small_model()
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    before = [w.detach().clone() for w in weights]
    fwd_bwd, step = bench_overlap.build_floor(model, None)
    x = torch.randn(2, 17, 64, dtype=torch.float16)
    for _ in range(3):
        fwd_bwd(x)
        step()
    assert _nonfinite_fraction(model) == 0.0
    # Real steps: every matmul weight moved (LayerNorm's ones move by less than an fp16 ulp).
    assert all(not torch.equal(b, w.detach()) for b, w in zip(before, weights))


def test_step_chunks_option_reaches_every_tritonzero_system(monkeypatch):
    calls = []
    monkeypatch.setattr(bench_overlap, "build_tz", lambda model, args, bucket, **kw: calls.append((bucket, kw)))
    plan = bench_overlap.plan_systems("floor,tz-fused,tz-overlap,ddp", [1e6, 1e8], "1,3")
    names = [name for name, _ in plan]
    assert names[:5] == ["floor (1 GPU, no sync)", "tz-fused 1e+06 K=1", "tz-fused 1e+06 K=3", "tz-fused 1e+08 K=1",
                         "tz-fused 1e+08 K=3"]
    assert names[-2:] == ["ddp 1e+06", "ddp 1e+08"]  # not a tritonzero system: once per bucket size
    for name, builder in plan[1:9]:
        builder(None, None)
    assert calls[:2] == [(1e6, {"fused": True, "step_chunks": 1}), (1e6, {"fused": True, "step_chunks": 3})]
    assert calls[4:6] == [(1e6, {"fused": True, "overlap": True, "step_chunks": 1}),
                          (1e6, {"fused": True, "overlap": True, "step_chunks": 3})]
    # Without the option, the library's default.
    bench_overlap.plan_systems("tz", [25e6])[0][1](None, None)
    assert calls[-1] == (25e6, {})


def test_floor_sync_is_the_floor_plus_one_rendezvous_after_backward_and_after_the_step(monkeypatch):
    plan = bench_overlap.plan_systems("floor,floor-sync", [1e6])
    assert [name for name, _ in plan] == ["floor (1 GPU, no sync)", "floor + 2 rendezvous"]
    calls = []
    monkeypatch.setattr(bench_overlap.dist, "all_reduce", lambda t: calls.append(t.numel()))
    model = _small_model()
    fwd_bwd, step = plan[1][1](model, None)
    fwd_bwd(torch.randn(2, 17, 64, dtype=torch.float16))
    assert calls == [1] and all(p.grad is not None for p in model.parameters())
    step()
    assert calls == [1, 1] and _nonfinite_fraction(model) == 0.0


def test_floor_shard_sync_steps_only_this_ranks_share_and_drops_every_gradient(monkeypatch):
    monkeypatch.setattr(bench_overlap.dist, "get_world_size", lambda: 3)
    plan = bench_overlap.plan_systems("floor-shard-sync", [1e6])
    assert [name for name, _ in plan] == ["floor, shard step + 2 rdv"]
    calls = []
    monkeypatch.setattr(bench_overlap.dist, "all_reduce", lambda t: calls.append(t.numel()))
    model = _small_model()
    params = list(model.parameters())
    stepped = bench_overlap.share_of(params, 1 / 3)
    total = sum(p.numel() for p in params)
    # The shortest prefix holding a third of the elements: one parameter less holds less.
    assert 3 * sum(p.numel() for p in stepped) >= total > 3 * sum(p.numel() for p in stepped[:-1])
    before = [p.detach().clone() for p in params]
    fwd_bwd, step = plan[0][1](model, None)
    fwd_bwd(torch.randn(2, 17, 64, dtype=torch.float16))
    step()
    assert calls == [1, 1]
    assert all(p.grad is None for p in params)
    moved = [not torch.equal(b, p.detach()) for b, p in zip(before, params)]
    assert not any(moved[len(stepped):])  # the other ranks' shares are left alone
    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    assert any(id(p) in linear_weights for p in stepped)
    assert all(m for m, p in zip(moved, stepped) if id(p) in linear_weights)  # real steps on this rank's share
    assert _nonfinite_fraction(model) == 0.0


def test_pooled_rounds_take_every_step_of_every_round():
    def row(system, round_, sync, step, peak):
        return {"system": system, "round": round_, "fwd_bwd_sync_ms": sorted(sync)[len(sync) // 2], "peak_gib": peak,
                "steps": {"fwd_bwd_sync_ms": sync, "step_ms": step}}

    rows = [row("floor", 0, [20.0, 21.0, 25.0], [26.0, 27.0, 30.0], 7.5),
            row("tz 1e+06", 0, [150.0, 160.0, 140.0], [300.0, 310.0, 290.0], 5.1),
            {"system": "deepspeed 1e+06", "round": 0, "error": "ImportError"},
            row("floor", 1, [19.0, 22.0, 23.0], [25.0, 28.0, 29.0], 7.4),
            row("tz 1e+06", 1, [130.0, 135.0, 170.0], [280.0, 285.0, 330.0], 5.2)]
    table = bench_overlap.pooled(rows)
    assert [r["system"] for r in table] == ["floor", "tz 1e+06"]  # the failed system is left out
    floor, tz = table
    assert floor["fwd_bwd_sync_ms"] == 21.5 and floor["step_ms"] == 27.5
    # The median of six steps: the median of the two rounds' medians would be 142.5 and 292.5.
    assert tz["fwd_bwd_sync_ms"] == 145.0 and tz["step_ms"] == 295.0
    assert tz["round_medians"] == [150.0, 135.0] and tz["peak_gib"] == 5.2 and tz["round"] == "all"
