"""ZeroOptimizer on 1, 2 and 3 gloo ranks equals a one-process fp64 reference."""

from __future__ import annotations

import functools

import pytest

from conftest import cpu_only
from distributed import run_ranks
from equivalence import TOLERANCE, run_case

# (optimizer, dtype, bucket_size): 200 elements makes many buckets and puts the 765- and
# 1485-element weights each in a bucket of their own (a parameter bigger than a bucket);
# 10**6 makes one bucket bigger than the whole model.
CASES = [(o, d, b) for o in ("sgd", "adamw") for d in ("fp32", "bf16", "fp16") for b in (200, 10**6)]
TINY = ("sgd", "fp16", 200)  # gradients around 1e-7: must not underflow in the fp16 reduction

pytestmark = cpu_only


def all_cases(device: str = "cpu") -> list[dict]:
    out = [run_case(*case, device=device) for case in CASES]
    out.append(run_case(*TINY, grad_scale=1e-6, lr=0.05 / 1e-6, device=device))
    out.append(run_case("adamw", "fp32", 300, use_all=False, device=device))  # a parameter without gradient
    return out


@functools.cache
def results(world_size: int) -> list[dict]:
    """Every case on ``world_size`` gloo ranks in one launch (process start-up dominates on CPU)."""
    return run_ranks(world_size, all_cases)


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("case", range(len(CASES)), ids=["-".join(map(str, c)) for c in CASES])
def test_matches_reference(world_size, case):
    opt, dtype, bucket_size = CASES[case]
    for rank, res in enumerate(results(world_size)):
        assert res[case]["rel_err"] < TOLERANCE[opt, dtype], (rank, res[case])
    assert bucket_size > 10**5 or results(world_size)[0][case]["buckets"] > 2


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_tiny_fp16_gradients_survive_reduction(world_size):
    for res in results(world_size):
        assert res[len(CASES)]["rel_err"] < TOLERANCE["sgd", "fp16"], res[len(CASES)]


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_parameter_without_gradient_counts_as_zero(world_size):
    for res in results(world_size):
        assert res[len(CASES) + 1]["rel_err"] < TOLERANCE["adamw", "fp32"], res[len(CASES) + 1]
