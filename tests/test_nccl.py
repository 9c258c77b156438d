"""The equivalence cases on 2 GPUs with NCCL (skipped with fewer than 2 GPUs)."""

from __future__ import annotations

import pytest
import torch

from distributed import run_ranks
from equivalence import TOLERANCE
from test_equivalence import CASES, all_cases

pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


def test_nccl_two_gpus_match_reference():
    per_rank = run_ranks(2, all_cases, "cuda", backend="nccl")
    names = [f"{o}-{d}-{b}" for o, d, b in CASES] + ["tiny-fp16", "unused-param"]
    keys = [(o, d) for o, d, _ in CASES] + [("sgd", "fp16"), ("adamw", "fp32")]
    for rank, res in enumerate(per_rank):
        for name, key, r in zip(names, keys, res):
            print(f"rank {rank} {name}: rel_err {r['rel_err']:.2e} (tol {TOLERANCE[key]:.0e})")
            assert r["rel_err"] < TOLERANCE[key], (rank, name, r)
