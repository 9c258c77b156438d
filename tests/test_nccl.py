"""The equivalence and in-place send-buffer cases on 2 GPUs with NCCL, with either reduce transport
(skipped with fewer than 2 GPUs)."""

from __future__ import annotations

import pytest
import torch

from distributed import run_ranks
from test_equivalence import CASES, all_cases, tolerance
from test_send_buffer import DTYPES, REDUCE, check, every_case

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


@pytest.mark.parametrize("transport", ["collective", "copy_engine"])
def test_nccl_two_gpus_match_reference(transport):
    per_rank = run_ranks(2, all_cases, "cuda", transport, backend="nccl")
    for rank, res in enumerate(per_rank):
        for name, r in res.items():
            print(f"rank {rank} {name}: rel_err {r['rel_err']:.2e} (tol {tolerance(CASES[name]):.0e})")
            assert r["rel_err"] < tolerance(CASES[name]), (rank, name, r)


@pytest.mark.parametrize("transport", ["collective", "copy_engine"])
def test_nccl_exact_fit_reduces_in_place(transport):
    per_rank = run_ranks(2, every_case, "cuda", transport, backend="nccl")
    for dtype_name in DTYPES:
        for reduce_id in REDUCE:
            check(2, per_rank, dtype_name, reduce_id)
        assert all(r[f"nonfinite-{dtype_name}"] for r in per_rank), dtype_name  # step skipped everywhere
