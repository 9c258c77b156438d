"""The equivalence cases on 2 GPUs with NCCL (skipped with fewer than 2 GPUs)."""

from __future__ import annotations

import pytest
import torch

from distributed import run_ranks
from test_equivalence import CASES, all_cases, tolerance

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


def test_nccl_two_gpus_match_reference():
    per_rank = run_ranks(2, all_cases, "cuda", backend="nccl")
    for rank, res in enumerate(per_rank):
        for name, r in res.items():
            print(f"rank {rank} {name}: rel_err {r['rel_err']:.2e} (tol {tolerance(CASES[name]):.0e})")
            assert r["rel_err"] < tolerance(CASES[name]), (rank, name, r)
