"""The equivalence and in-place send-buffer cases on 2 and 4 GPUs with NCCL, with either reduce
transport, and the copy engine's ``keep_grads_until_step`` (each world size skipped with fewer GPUs)."""

from __future__ import annotations

import pytest
import torch

from distributed import gpu_worlds, run_ranks
from equivalence import DTYPES, MIXED, run_case
from test_equivalence import CASES, all_cases, tolerance
from test_send_buffer import REDUCE, check, every_case

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


# ``mid.weight`` 68,895 elements: a bucket of its own under keep_grads_until_step, copied straight
# from the gradient; rank 0's slice lies inside it, the last rank's takes the bucket's padding.
WIDE_MID = 1531


def keep_pairs(device: str) -> dict[str, tuple[dict, dict]]:
    """Every equivalence case on the wide net by copy engine, without and with ``keep_grads_until_step``."""
    return {
        name: tuple(
            run_case(**kw, device=device, reduce_transport="copy_engine", mid_width=WIDE_MID, keep_grads=keep)
            for keep in (False, True)
        )
        for name, kw in CASES.items()
    }


@pytest.mark.parametrize("world", gpu_worlds(2, 4))
def test_keep_grads_until_step_changes_no_bit(world):
    """A kept slice is summed in place, in the order a copied one is: within the reference's
    tolerance in every case (accumulation under ``no_sync``, clipping, overlapped all-gathers, a
    step skipped for a non-finite gradient), and the same updates to the bit. Except with clipping
    where keeping changed the buckets (``mid.weight`` alone in a bucket of its own): the global
    norm is then summed in another order."""
    per_rank = run_ranks(world, keep_pairs, "cuda", backend="nccl")
    for rank, res in enumerate(per_rank):
        for name, (plain, kept) in res.items():
            print(f"rank {rank} {name}: rel_err {kept['rel_err']:.2e}, {kept['kept']} bucket(s) kept")
            assert kept["rel_err"] < tolerance(CASES[name]), (rank, name, kept)
            if "clip" not in CASES[name] or plain["buckets"] == kept["buckets"]:
                assert kept["rel_err"] == plain["rel_err"], (rank, name, plain, kept)
            assert plain["kept"] == 0, (rank, name)
    # Rank 0 keeps mid.weight's slice wherever the bucket goes unprepped.
    for name, (_, kept) in per_rank[0].items():
        assert kept["kept"] >= (1 if mid_goes_unprepped(CASES[name]) else 0), (name, kept)


def mid_goes_unprepped(case: dict) -> bool:
    """Whether ``mid.weight``'s bucket is sent straight from the gradient: no cast to another
    reduce dtype, and no loss scale to divide by first. Any fp16 layer turns the loss scale on,
    and only fp16 sums keep it; others are unscaled by prep before the sum (in "mixed", the
    fp32 ``mid`` beside the fp16 ``out``)."""
    name = case["dtype_name"]
    dtypes = MIXED if name == "mixed" else dict.fromkeys(MIXED, DTYPES[name])
    scaled = torch.float16 in dtypes.values()
    return not case.get("reduce_dtype") and (not scaled or dtypes["mid"] == torch.float16)
