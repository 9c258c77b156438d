"""Bucket layout: aligned, non-overlapping regions, rank-contiguous shards, backward order."""

from __future__ import annotations

import pytest
import torch

from tritonzero.kernels.bucket_prep import REGION_ALIGN
from tritonzero.layout import SHARD_ALIGN, plan_buckets


def _params(sizes, dtype=torch.float32):
    return [torch.nn.Parameter(torch.empty(n, dtype=dtype)) for n in sizes]


@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
@pytest.mark.parametrize("bucket_size", [1, 100, 5000, 10**9])
def test_layout_invariants(world_size, bucket_size):
    sizes = [5, 1023, 7, 4097, 1, 300, 77]
    params = _params(sizes)
    layouts = plan_buckets(params, [0] * len(params), bucket_size, world_size)
    seen = [i for lay in layouts for i in lay.param_indices]
    assert sorted(seen) == list(range(len(sizes)))  # each parameter once
    # Expected backward order (reverse registration) inside a bucket, and buckets in the order
    # their last gradient arrives: their launch order.
    assert all(list(lay.param_indices) == sorted(lay.param_indices, reverse=True) for lay in layouts)
    last = [lay.param_indices[-1] for lay in layouts]
    assert last == sorted(last, reverse=True)
    for lay in layouts:
        assert lay.padded_numel % (world_size * SHARD_ALIGN) == 0
        assert lay.shard_numel * world_size == lay.padded_numel
        ends = [o + n for o, n in zip(lay.offsets, lay.numels)]
        assert all(o % REGION_ALIGN == 0 for o in lay.offsets)
        assert all(e <= o for e, o in zip(ends, lay.offsets[1:])) and ends[-1] <= lay.padded_numel
        if len(lay.numels) > 1:  # only a parameter larger than a bucket may exceed it, alone
            assert sum(lay.numels) <= bucket_size + REGION_ALIGN * len(lay.numels)
            assert max(lay.numels) <= bucket_size


def test_oversized_parameter_gets_its_own_bucket():
    # Backward order: 3, 2 (large), 1, 0 (large): the small gradients keep filling the open bucket.
    params = _params([5000, 7, 4096, 3])
    layouts = plan_buckets(params, [0] * 4, 100, world_size=2)
    assert [lay.param_indices for lay in layouts] == [(2,), (3, 1), (0,)]  # launch order
    # 4096 elements on 2 ranks fit their bucket exactly (no padding); 5000 does not.
    assert [lay.padded_numel == sum(lay.numels) for lay in layouts] == [True, False, False]
    # A full bucket closes before the next small parameter that does not fit.
    layouts = plan_buckets(_params([5000, 60, 60, 300, 200]), [0] * 5, 100, world_size=2)
    assert [lay.param_indices for lay in layouts] == [(4,), (3,), (2,), (1,), (0,)]


def test_parameters_from_alone_from_get_their_own_bucket():
    # Backward order: 4, 3 (large), 2, 1 (large), 0; every bucket well below bucket_size.
    params = _params([7, 4096, 60, 5000, 3])
    layouts = plan_buckets(params, [0] * 5, 10**6, world_size=2, alone_from=4096)
    assert [lay.param_indices for lay in layouts] == [(3,), (1,), (4, 2, 0)]  # launch order
    assert [lay.param_indices for lay in plan_buckets(params, [0] * 5, 10**6, 2)] == [(4, 3, 2, 1, 0)]


def test_dtypes_and_groups_get_separate_buckets():
    params = _params([10, 20]) + _params([30], torch.float16) + _params([40])
    layouts = plan_buckets(params, [0, 1, 0, 0], 10**6, 2)
    keys = sorted((lay.dtype == torch.float16, lay.group, lay.param_indices) for lay in layouts)
    assert keys == [(False, 0, (3, 0)), (False, 1, (1,)), (True, 0, (2,))]


def test_bad_bucket_size():
    with pytest.raises(ValueError, match="bucket_size"):
        plan_buckets(_params([3]), [0], 0, 1)
