"""Bucket layout: which parameters share a bucket, where each one lands, which slice a rank owns.

Parameters are grouped by (dtype, optimizer param group) and taken in expected backward order
(reverse registration). Each parameter gets a region at an offset aligned to ``REGION_ALIGN``
elements; the bucket is padded so it splits into ``world_size`` equal shards whose length is a
multiple of ``SHARD_ALIGN``. Rank r owns elements ``[r * shard, (r + 1) * shard)`` of every
bucket, so a bucket's gradients reduce with one ``reduce_scatter_tensor``::

    bucket 0 (fp16, group 0)        |<------ rank 0 ------>|<------ rank 1 ------>|
    regions                         | p5 ..pad| p4 ..pad| p3 .............. | pad |
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tritonzero.kernels.bucket_prep import REGION_ALIGN

__all__ = ["BucketLayout", "plan_buckets", "SHARD_ALIGN"]

# Shard lengths are multiples of this many elements: 128-byte aligned shards for any dtype.
SHARD_ALIGN = 64


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


@dataclass(frozen=True)
class BucketLayout:
    """Static placement of one bucket's parameters (indices into the model's parameter list)."""

    param_indices: tuple[int, ...]
    offsets: tuple[int, ...]
    numels: tuple[int, ...]
    padded_numel: int
    dtype: torch.dtype
    group: int
    world_size: int

    @property
    def shard_numel(self) -> int:
        return self.padded_numel // self.world_size

    def shard_range(self, rank: int) -> tuple[int, int]:
        return rank * self.shard_numel, (rank + 1) * self.shard_numel


def plan_buckets(
    params: list[torch.nn.Parameter], groups: list[int], bucket_size: int, world_size: int,
    alone_from: int | None = None,
) -> list[BucketLayout]:
    """Pack ``params`` (registration order; ``groups[i]`` is param i's optimizer group) into buckets
    of at most ``bucket_size`` elements, except that a parameter larger than ``bucket_size`` (or of
    at least ``alone_from`` elements, if given) gets a bucket of its own, while the small
    parameters around it (biases, norms) keep filling the open bucket instead of costing a
    collective each. Alone, a large gradient usually fills its bucket
    exactly (its size a multiple of ``world_size * SHARD_ALIGN``), and then reduces in place with
    no bucket-sized buffer (``Bucket._whole_grad``).
    Buckets are returned in expected launch order within each (dtype, group) stream.
    """
    if bucket_size < 1:
        raise ValueError(f"bucket_size must be a positive number of elements, got {bucket_size}")
    streams: dict[tuple[torch.dtype, int], list[int]] = {}
    for i in reversed(range(len(params))):
        streams.setdefault((params[i].dtype, groups[i]), []).append(i)

    layouts = []
    for (dtype, group), indices in streams.items():
        stream: list[BucketLayout] = []
        current: list[int] = []
        filled = 0
        for i in indices:
            n = params[i].numel()
            if n > bucket_size or (alone_from is not None and n >= alone_from):
                stream.append(_layout(params, [i], dtype, group, world_size))
                continue
            if current and filled + n > bucket_size:
                stream.append(_layout(params, current, dtype, group, world_size))
                current, filled = [], 0
            current.append(i)
            filled += _round_up(n, REGION_ALIGN)
        if current:
            stream.append(_layout(params, current, dtype, group, world_size))
        # Launch order: a bucket launches when its last gradient arrives (a bucket of small
        # parameters closed by a later one may have completed before a large one in between).
        layouts += sorted(stream, key=lambda lay: -lay.param_indices[-1])
    return layouts


def _layout(params, indices, dtype, group, world_size) -> BucketLayout:
    offsets, numels, end = [], [], 0
    for i in indices:
        offsets.append(end)
        numels.append(params[i].numel())
        end += _round_up(params[i].numel(), REGION_ALIGN)
    return BucketLayout(
        param_indices=tuple(indices),
        offsets=tuple(offsets),
        numels=tuple(numels),
        padded_numel=_round_up(max(end, 1), world_size * SHARD_ALIGN),
        dtype=dtype,
        group=group,
        world_size=world_size,
    )
