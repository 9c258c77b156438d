"""Reduce-scatter by copy-engine pushes between the GPUs of one node (``reduce_transport="copy_engine"``).

NCCL's reduce-scatter runs as SM kernels beside backward; backward's persistent GEMMs then wait
for the SMs they hold (on 2 x H200 its GEMMs ran 1.45 ms longer a step). A copy engine moves
the same bytes with no SM. Each rank owns a receive buffer in symmetric memory with one slot
per (bucket, peer); when a bucket is ready, the comm stream copies every peer's slice of it
into that peer's slot on that peer (a peer-to-peer ``cudaMemcpyAsync``: copy engines over
NVLink) and its own slice into ``grad_shard``. Nothing waits per bucket. The sum is left to the
step, where it costs one elementwise pass over the shard::

    rank 0  comm   ..[copy slice 1 -> rank 1's slot b3][copy slice 0 -> grad_shard b3]..
    rank 1  comm   ..[copy slice 0 -> rank 0's slot b3][copy slice 1 -> grad_shard b3]..
    finish_grad_sync: compute waits for its own copies, then a barrier: every peer's have landed
    step:   grad_shard += slots (every peer's), then the master-gradient pass (x 1/world size)

Most buckets need no prep kernel: the copies read the gradients themselves, each gradient's
part of each slice straight into its place in the slot (``push_grads``), and the step's
master-gradient pass applies the 1 / world size factor and the non-finite check. A bucket is
prepped into a send buffer first (``push``) when its gradients need a cast or an unscale before
the sum, or when it holds many small gradients (one copy per gradient and destination would
cost more host time than one prep launch).

With ``keep_grads`` (``ZeroOptimizer(keep_grads_until_step=True)``, which also gives every
parameter of ``DIRECT_MIN_ELEMENTS`` or more a bucket of its own) a rank whose slice of a bucket
lies inside one gradient copies nothing locally: that slice of the gradient is ``grad_shard``,
and the step sums the slots into it in place. The local copy, a read and a write of the slice
in the GPU's memory beside backward's kernels, is gone; the gradient is held whole until the
step instead of this rank's slice of it.

Memory: the slots stay allocated, (world size - 1) x the shard in the reduce dtype, outside
torch's caching allocator (``torch.cuda.max_memory_allocated`` does not count them).
Measured on 2 GPUs; tested on 2 and 4 (tests/test_nccl.py, tests/test_copy_engine_gpu.py). The
slot layout is written for any world size within one node.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.distributed as dist

from tritonzero.bucket import Bucket
from tritonzero.layout import BucketLayout

__all__ = ["CopyEngineReduce", "TRANSPORTS", "DIRECT_MIN_ELEMENTS"]

TRANSPORTS = ("collective", "copy_engine")

_SLOT_ALIGN = 256  # bytes: every slot starts where any dtype's vector loads are aligned
# A peer that never arrives (it failed mid-step) makes the barrier kernel trap after this long,
# which fails this process's next CUDA call instead of hanging it; NCCL's watchdog default.
_BARRIER_TIMEOUT_MS = 600_000
# Buckets whose gradients average at least this many elements are copied straight from the
# gradients (one copy per gradient and destination, several microseconds of host time each on
# the comm thread); below it, one prep launch into a send buffer and one copy per destination
# cost less. Transformer weights are millions of elements; a bucket of biases and norms
# averages thousands.
DIRECT_MIN_ELEMENTS = 1 << 16


class CopyEngineReduce:
    """The receive slots of ``buckets`` on this rank, and the peers' slots this rank writes."""

    def __init__(
        self, buckets: list[Bucket], group: dist.ProcessGroup, rank: int, world_size: int, keep_grads: bool = False
    ):
        """``keep_grads``: where this rank's slice of a bucket lies inside one gradient, that slice
        of the gradient becomes ``grad_shard`` in place (held, whole, until the step) instead of
        being copied out beside backward (``push_grads``)."""
        import torch.distributed._symmetric_memory as symm_mem

        # One layout on every rank: slot (b, j) holds sender j's slice of bucket b, j counting the
        # senders in rank order with the receiver left out, so every rank computes the same offsets.
        offsets: dict[tuple[int, int], int] = {}
        total = 0
        for b in buckets:
            for j in range(world_size - 1):
                offsets[b.index, j] = total
                total += -(-b.layout.shard_numel * b.reduce_dtype.itemsize // _SLOT_ALIGN) * _SLOT_ALIGN
        device = buckets[0].param_buffer.device
        self.nbytes = max(total, 1)  # this rank's slots: memory torch's caching allocator does not count
        self._buffer = symm_mem.empty(self.nbytes, dtype=torch.uint8, device=device)
        # HAZARD (stale padding): copies straight from the gradients (``push_grads``) never write
        # a slot's padding, which the step sums and checks for non-finite values: zeros from
        # here on. They land before any peer's first copy: this host waits for them before the
        # rendezvous, which every peer passes before its first backward.
        self._buffer.zero_()
        torch.cuda.synchronize(device)
        try:
            self._handle = symm_mem.rendezvous(self._buffer, group)
        except RuntimeError as e:
            raise RuntimeError(
                "tritonzero: reduce_transport='copy_engine' needs every rank's GPU mapped by every other "
                "(one node, peer access); use the default 'collective'"
            ) from e

        def slot(buffer: torch.Tensor, b: Bucket, sender: int, receiver: int) -> torch.Tensor:
            offset = offsets[b.index, sender if sender < receiver else sender - 1]
            return buffer[offset : offset + b.layout.shard_numel * b.reduce_dtype.itemsize].view(b.reduce_dtype)

        # Views made once (a view costs microseconds of host time; each step would make hundreds).
        peers = [q for q in range(world_size) if q != rank]
        remote = {q: self._handle.get_buffer(q, (self.nbytes,), torch.uint8) for q in peers}
        self._outgoing = {  # bucket index -> (this rank's slot on peer q, the slice of the bucket it gets)
            b.index: [(slot(remote[q], b, rank, q), slice(*b.layout.shard_range(q))) for q in peers] for b in buckets
        }
        self._own = {b.index: slice(*b.layout.shard_range(rank)) for b in buckets}  # this rank's slice of each bucket
        self._buckets = buckets
        self._incoming = [[slot(self._buffer, b, q, rank) for b in buckets] for q in peers]  # per sender, per bucket
        # For ``push_grads``: each bucket's parts, peers' slot pieces as views (this rank's shard
        # is a new tensor each step, so slices of it).
        self._direct: dict[int, _DirectParts] = {}
        for b in filter(self.copies_directly, buckets):
            to_peers: list[list[tuple[torch.Tensor, slice]]] = [[] for _ in b.params]
            for peer_slot, part in self._outgoing[b.index]:
                for i, src, dst in _parts(b.layout, part):
                    to_peers[i].append((peer_slot[dst], src))
            own: list[list[tuple[slice, slice]]] = [[] for _ in b.params]
            for i, src, dst in _parts(b.layout, self._own[b.index]):
                own[i].append((dst, src))
            covered = sum(dst.stop - dst.start for parts in own for dst, _ in parts)
            inside = [  # (gradient, its slice) holding this rank's whole slice
                (i, src) for i, parts in enumerate(own) for dst, src in parts if dst.stop - dst.start == b.layout.shard_numel
            ]
            self._direct[b.index] = _DirectParts(
                to_peers, own, covered < b.layout.shard_numel, inside[0] if keep_grads and inside else None
            )
        self._landed = False

    @staticmethod
    def copies_directly(bucket: Bucket) -> bool:
        """Whether ``bucket`` can go by ``push_grads``: its gradients are in the reduce dtype, and
        one gradient (as many copies as a send buffer) or gradients of ``DIRECT_MIN_ELEMENTS`` on
        average. ``GradSync`` sends it so unless a loss scale must divide it before the sum."""
        layout = bucket.layout
        return bucket.reduce_dtype == layout.dtype and (
            len(layout.numels) == 1 or sum(layout.numels) >= DIRECT_MIN_ELEMENTS * len(layout.numels)
        )

    def push(self, bucket: Bucket, send: torch.Tensor) -> None:
        """On the comm stream: every peer's slice of the prepped ``send`` into its slot there,
        ours into ``grad_shard``.

        HAZARD (overwrite), here and in ``push_grads``: a slot is read by its owner's step
        (``add_received``) and written again by the next backward here. Every rank's step
        all-reduces its overflow flag on the compute stream after that read, and this
        backward's copies come after that all-reduce (compute stream order, then the bucket's
        "grads ready" event): an all-reduce cannot finish here before the owner's has started,
        after its read.
        """
        for peer_slot, part in self._outgoing[bucket.index]:
            peer_slot.copy_(send[part])
        bucket.grad_shard.copy_(send[self._own[bucket.index]])

    def push_grads(self, bucket: Bucket) -> None:
        """On the comm stream, for a bucket that ``copies_directly``: each gradient's part of
        every peer's slice straight into its place in that peer's slot, its part of this rank's
        slice into a new ``grad_shard``, or, kept (``keep_grads``), the gradient's slice as the
        shard; a missing gradient's parts and the shard's padding as zeros (the slots' padding
        is zero from ``__init__`` on). No factor applied: see the module doc."""
        parts = self._direct[bucket.index]
        kept = parts.kept if parts.kept is not None and bucket.grads[parts.kept[0]] is not None else None
        if kept is not None:
            # HAZARD (write-while-read): the step sums the peers' slots into this slice of the
            # gradient in place, on the compute stream after ``done`` (``GradSync.finish``), so
            # after these copies have read its other slices. The gradient is freed with the shard
            # at ``reset``, on the compute stream it was allocated on.
            i, src = kept
            bucket.grad_shard = bucket.grads[i].view(-1)[src]
        else:
            bucket.grad_shard = bucket.new_shard()
        shard = bucket.grad_shard
        if kept is None and (parts.padded or any(g is None for g in bucket.grads)):
            shard.zero_()
        for grad, peer_parts, own_parts in zip(bucket.grads, parts.to_peers, parts.own):
            if grad is None:
                for dst, _ in peer_parts:
                    dst.zero_()  # last step's values are still there
                continue
            flat = grad.view(-1)
            for dst, src in peer_parts:
                dst.copy_(flat[src])
            if kept is None:
                for dst, src in own_parts:
                    shard[dst].copy_(flat[src])

    def wait_for_peers(self) -> None:
        """On the current stream, after it waited for this rank's pushes: a barrier that every
        rank reaches only after its own pushes, so every slot here is written. Once per step."""
        if not self._landed:
            # HAZARD (read-before-write): without it the step would sum slots a peer's copy
            # engine is still writing (or has not started: peers run backward at their own pace).
            self._handle.barrier(channel=0, timeout_ms=_BARRIER_TIMEOUT_MS)
            self._landed = True

    def add_received(self) -> None:
        """``grad_shard += slot`` for every bucket and peer, on the current stream (after ``wait_for_peers``)."""
        shards = [b.grad_shard for b in self._buckets]
        for slots in self._incoming:
            torch._foreach_add_(shards, slots)
        self._landed = False

    def reset(self) -> None:
        """A step dropped without summing (``zero_grad`` after backward): the next ``finish`` waits again."""
        self._landed = False


class _DirectParts(NamedTuple):
    """Where ``push_grads`` copies a bucket's gradients, per gradient: (destination view, slice of
    the flat gradient) in peers' slots, and (slice of ``grad_shard``, slice of the flat gradient)."""

    to_peers: list[list[tuple[torch.Tensor, slice]]]
    own: list[list[tuple[slice, slice]]]
    padded: bool  # the gradients leave part of this rank's shard uncovered (zeroed per step)
    kept: tuple[int, slice] | None  # with ``keep_grads``: the gradient (index, slice) that is this rank's whole slice


def _parts(layout: BucketLayout, part: slice):
    """(gradient index, slice of the flat gradient, slice of ``part``) for every gradient with
    elements in ``part`` of the bucket."""
    for i, (offset, numel) in enumerate(zip(layout.offsets, layout.numels)):
        lo, hi = max(offset, part.start), min(offset + numel, part.stop)
        if lo < hi:
            yield i, slice(lo - offset, hi - offset), slice(lo - part.start, hi - part.start)
