"""The equivalence and in-place send-buffer cases on 2 and 4 GPUs with NCCL, with either reduce
transport (each world size skipped with fewer GPUs)."""

from __future__ import annotations

import pytest
import torch

from distributed import gpu_worlds, run_ranks
from test_equivalence import CASES, all_cases, tolerance
from test_send_buffer import DTYPES, REDUCE, check, every_case

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


@pytest.mark.parametrize("world", gpu_worlds(2, 4))
@pytest.mark.parametrize("transport", ["collective", "copy_engine"])
def test_nccl_gpus_match_reference(transport, world):
    per_rank = run_ranks(world, all_cases, "cuda", transport, backend="nccl")
    for rank, res in enumerate(per_rank):
        for name, r in res.items():
            print(f"rank {rank} {name}: rel_err {r['rel_err']:.2e} (tol {tolerance(CASES[name]):.0e})")
            assert r["rel_err"] < tolerance(CASES[name]), (rank, name, r)


@pytest.mark.parametrize("world", gpu_worlds(2, 4))
@pytest.mark.parametrize("transport", ["collective", "copy_engine"])
def test_nccl_exact_fit_reduces_in_place(transport, world):
    per_rank = run_ranks(world, every_case, "cuda", transport, backend="nccl")
    for dtype_name in DTYPES:
        for reduce_id in REDUCE:
            check(world, per_rank, dtype_name, reduce_id)
        assert all(r[f"nonfinite-{dtype_name}"] for r in per_rank), dtype_name  # step skipped everywhere
