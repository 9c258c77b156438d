"""Bad input fails with a clear error, never a hang or silent corruption."""

from __future__ import annotations

import threading

import pytest
import torch

from conftest import cpu_only
from distributed import run_ranks
from tritonzero import ZeroOptimizer

pytestmark = cpu_only


def _mlp(*sizes):
    return torch.nn.Sequential(*[torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])


def test_parameters_on_different_devices():
    model = _mlp(3, 4, 2)
    model[1].to("meta")
    with pytest.raises(ValueError, match="different devices"):
        ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_unsupported_dtype():
    model = _mlp(3, 4).double()
    with pytest.raises(TypeError, match="not supported"):
        ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_optimizer_over_foreign_parameters():
    model, other = _mlp(3, 4), _mlp(3, 4)
    with pytest.raises(ValueError, match="not trainable parameters of the model"):
        ZeroOptimizer(model, torch.optim.SGD(list(model.parameters()) + list(other.parameters()), lr=0.1))


def test_optimizer_missing_model_parameters():
    model = _mlp(3, 4, 2)
    with pytest.raises(ValueError, match="not in the optimizer"):
        ZeroOptimizer(model, torch.optim.SGD(model[0].parameters(), lr=0.1))


def test_sparse_gradients():
    model = torch.nn.Embedding(10, 3, sparse=True)
    opt = ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(RuntimeError, match="sparse gradients"):
        model(torch.tensor([1, 2])).sum().backward()


def test_second_backward_before_step():
    model = _mlp(3, 4)
    opt = ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1))
    opt.backward(model(torch.randn(2, 3)).sum())
    with pytest.raises(RuntimeError, match="second gradient"):
        opt.backward(model(torch.randn(2, 3)).sum())
    opt.zero_grad()  # recovers: the next step works
    opt.backward(model(torch.randn(2, 3)).sum())
    opt.step()


def _failing_syncs(monkeypatch, max_buckets_in_flight: int) -> tuple[torch.nn.Module, ZeroOptimizer]:
    """A model of 4 buckets (one per layer) whose syncs all fail on the comm thread until undone."""
    import tritonzero.bucket

    model = _mlp(16, 16, 16, 16, 16)
    opt = ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), bucket_size=16 * 16 + 16,
                        max_buckets_in_flight=max_buckets_in_flight)
    assert len(opt.buckets) == 4

    def fail(*args, **kwargs):
        raise OSError("injected")

    monkeypatch.setattr(tritonzero.bucket, "prep_bucket", fail)
    return model, opt


def _steps_normally(model: torch.nn.Module, opt: ZeroOptimizer) -> bool:
    before = [p.detach().clone() for p in model.parameters()]
    opt.backward(model(torch.randn(3, 16)).sum())
    opt.step()
    return not any(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))


def test_failed_sync_raises_from_backward_under_back_pressure(monkeypatch):
    """A bucket whose sync fails on the comm thread makes backward raise where back-pressure waits
    for it (it used to wait forever: a failed bucket is never issued); ``step`` raises too until
    ``zero_grad``, after which the optimizer steps as usual."""
    model, opt = _failing_syncs(monkeypatch, max_buckets_in_flight=1)  # the second launch waits for the first
    raised = []

    def backward():
        try:
            opt.backward(model(torch.randn(3, 16)).sum())
        except RuntimeError as e:
            raised.append(e)

    worker = threading.Thread(target=backward, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "backward hung on a failed bucket"
    assert len(raised) == 1 and "gradient sync failed" in str(raised[0]), raised
    assert isinstance(raised[0].__cause__, OSError), raised[0].__cause__
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="gradient sync failed"):
        opt.step()  # no step on buckets that were never reduced
    opt.zero_grad()  # the error was reported: no second report
    assert _steps_normally(model, opt)


def test_failed_sync_raises_until_zero_grad(monkeypatch):
    """Without back-pressure a failed sync surfaces at ``step``, at every call until ``zero_grad``;
    one nobody reported surfaces at ``zero_grad`` itself."""
    model, opt = _failing_syncs(monkeypatch, max_buckets_in_flight=32)
    opt.backward(model(torch.randn(3, 16)).sum())  # the failures are on the comm thread
    for _ in range(2):
        with pytest.raises(RuntimeError, match="gradient sync failed") as error:
            opt.step()
        assert isinstance(error.value.__cause__, OSError)
    opt.zero_grad()
    opt.backward(model(torch.randn(3, 16)).sum())
    with pytest.raises(RuntimeError, match="gradient sync failed"):
        opt.zero_grad()  # never reported before: reported here, and forgotten
    monkeypatch.undo()
    assert _steps_normally(model, opt)


def test_unknown_reduce_transport():
    model = _mlp(3, 4)
    with pytest.raises(ValueError, match="reduce_transport must be one of"):
        ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), reduce_transport="nvlink")


def test_keep_grads_needs_the_copy_engine():
    model = _mlp(3, 4)
    with pytest.raises(ValueError, match="keep_grads_until_step needs reduce_transport='copy_engine'"):
        ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), keep_grads_until_step=True)


def _copy_engine_on_cpu():
    model = _mlp(3, 4)
    try:
        ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1), reduce_transport="copy_engine")
    except ValueError as e:
        return str(e)
    return "no error"


def test_copy_engine_transport_needs_cuda():
    assert all("needs CUDA" in m for m in run_ranks(2, _copy_engine_on_cpu))


def _build_with_rank_dependent_shape():
    import torch.distributed as dist

    model = _mlp(3, 4 + dist.get_rank(), 2)
    try:
        ZeroOptimizer(model, torch.optim.SGD(model.parameters(), lr=0.1))
    except RuntimeError as e:
        return str(e)
    return "no error"


def test_shapes_differ_across_ranks():
    messages = run_ranks(2, _build_with_rank_dependent_shape)
    assert all("differ across ranks" in m for m in messages), messages
