"""Backward side of ZeRO-2: per-parameter hooks fill buckets, full buckets reduce on the comm thread.

A bucket is launched when its last gradient arrives; at the end of backward (an autograd
callback) the buckets still incomplete are launched with the gradients they have (a parameter
without one reads as zeros). Inside ``no_sync()`` nothing is launched and gradients accumulate
in ``param.grad`` as usual; the next synchronising backward takes the sums.
"""

from __future__ import annotations

import collections
import contextlib

import torch
import torch.distributed as dist

from tritonzero.bucket import Bucket
from tritonzero.copy_engine import CopyEngineReduce
from tritonzero.launcher import CommLauncher
from tritonzero.loss_scale import LossScaler
from tritonzero.timeline import Timeline
from tritonzero.weak_hooks import remove_with, weak_call

__all__ = ["GradSync"]


class GradSync:
    """Hooks, bucket launches, back-pressure and ``finish`` for one set of buckets."""

    def __init__(
        self,
        buckets: list[Bucket],
        world_size: int,
        group: dist.ProcessGroup | None,
        launcher: CommLauncher,
        scaler: LossScaler | None,
        max_buckets_in_flight: int,
        timeline: Timeline | None,
        transport: CopyEngineReduce | None = None,
    ):
        self.buckets = buckets
        self.world_size = world_size
        self.group = group
        self.launcher = launcher
        self.scaler = scaler
        self.max_buckets_in_flight = max_buckets_in_flight
        self.timeline = timeline
        device = buckets[0].param_buffer.device
        self.flag = torch.zeros(1, dtype=torch.int32, device=device)  # set by prep kernels on non-finite values
        # NCCL can average as it reduces (PreMulSum: each input times 1 / world_size in its own
        # dtype), with the rounding of prep's fp32 multiply when that factor is a power of two.
        average_in_collective = (
            group is not None and dist.get_backend(group) == "nccl" and world_size & (world_size - 1) == 0
        )
        self.transport = transport
        # Buckets sent without prep: on NCCL a gradient that is its own send buffer, which the
        # collective averages; with the copy-engine transport every bucket it can copy straight
        # from the gradients (the step averages). Decided here, once, from the layout: on NCCL a
        # bucket whose parameter gets no gradient is prepped as zeros instead, which any factor
        # leaves zero, so the step may apply its factor either way.
        self._unprepped = {
            b.index for b in buckets
            if self._divisor(b) is None
            and (transport.copies_directly(b) if transport is not None else average_in_collective and b.fits_exactly)
        }
        self.accumulating = False
        self._slot_of = {id(p): (b, i) for b in buckets for i, p in enumerate(b.params)}
        self._in_flight: collections.deque[Bucket] = collections.deque()  # launched, maybe unfinished
        self._callback_queued = False
        remove_with(self, [p.register_post_accumulate_grad_hook(weak_call(self._on_grad)) for b in buckets for p in b.params])

    def pending_factor(self, bucket: Bucket) -> float:
        """What the step must still multiply ``bucket``'s sum by: 1 / world size for a bucket the
        copy-engine transport sent unprepped; 1.0 otherwise (prep or the collective applied it)."""
        return 1.0 / self.world_size if self.transport is not None and bucket.index in self._unprepped else 1.0

    def _divisor(self, bucket: Bucket) -> torch.Tensor | None:
        """The loss scale, where prep must divide ``bucket``'s gradients by it before the sum."""
        return None if self.scaler is None or self.keeps_scale(bucket) else self.scaler.scale

    def keeps_scale(self, bucket: Bucket) -> bool:
        """fp16 sums keep the loss scale (unscaled fp16 gradients near 1e-7 would underflow) and
        are unscaled on the fp32 shard after the sum; other dtypes have the range to unscale first."""
        return self.scaler is not None and bucket.reduce_dtype == torch.float16

    @contextlib.contextmanager
    def no_sync(self):
        self.accumulating = True
        try:
            yield
        finally:
            self.accumulating = False

    def _on_grad(self, param: torch.Tensor) -> None:
        if param.grad.is_sparse:
            raise RuntimeError("tritonzero: sparse gradients are not supported (e.g. nn.Embedding(sparse=True))")
        if self.accumulating:
            return  # the gradient stays in param.grad; autograd adds the next micro-batch to it
        if not self._callback_queued:
            # Flushes buckets left incomplete by parameters that got no gradient this backward.
            torch.autograd.Variable._execution_engine.queue_callback(self.launch_remaining)
            self._callback_queued = True
        bucket, slot = self._slot_of[id(param)]
        grad, param.grad = param.grad, None  # the bucket holds it until the prep kernel has read it
        if bucket.add_grad(slot, grad):
            self._launch(bucket)

    def _launch(self, bucket: Bucket) -> None:
        # Buckets finish in launch order on the comm stream: retire the finished ones.
        while self._in_flight and self._in_flight[0].poll():
            self._in_flight.popleft()
        if len(self._in_flight) >= self.max_buckets_in_flight:
            # Back-pressure: the only place where compute may wait on comm during backward.
            oldest = self._in_flight.popleft()
            self.launcher.wait_for(oldest.issued)  # raises, on backward's thread, if issuing failed
            oldest.wait()
        bucket.mark_ready(self.timeline)
        divisor = self._divisor(bucket)
        flag, group, timeline, transport = self.flag, self.group, self.timeline, self.transport
        unprepped = bucket.index in self._unprepped
        self.launcher.submit(lambda: bucket.issue(1.0 / self.world_size, flag, group, timeline, divisor, unprepped, transport))
        self._in_flight.append(bucket)

    def launch_remaining(self) -> None:
        """Launch every bucket not launched yet, with the gradients it has (missing: zeros).

        Gradients accumulated under ``no_sync`` whose parameter got none in this backward are
        still in ``param.grad``: they are taken here.
        """
        self._callback_queued = False
        for bucket in self.buckets:
            if bucket.launched:
                continue
            for slot, p in enumerate(bucket.params):
                if bucket.grads[slot] is None and p.grad is not None:
                    grad, p.grad = p.grad, None
                    bucket.add_grad(slot, grad)
            self._launch(bucket)

    def finish(self) -> None:
        """Make the current stream wait for every bucket's reduce-scatter (no host sync on CUDA).

        With the copy-engine transport, for every peer's copies into this rank's slots; the sums
        are then made by ``sum_received``."""
        self.launch_remaining()
        self.launcher.drain()  # host waits for the comm thread to *issue* the work, not for the GPU
        try:
            for bucket in self.buckets:
                bucket.wait()
        except RuntimeError as e:
            raise RuntimeError(
                "tritonzero: gradient sync failed; another rank may have failed, left, or built a different model"
            ) from e
        self._in_flight.clear()
        if self.transport is not None:
            self.transport.wait_for_peers()

    def sum_received(self) -> None:
        """After ``finish``: add the peers' parts into every bucket's shard (copy-engine transport only)."""
        if self.transport is not None:
            self.transport.add_received()

    def reset(self) -> None:
        """Wait for anything launched, then forget this step's gradients, overflow flag and sync
        error (raised here if nothing has raised it before)."""
        try:
            self.launcher.recover()
        finally:
            for bucket in self.buckets:
                bucket.wait()
                bucket.reset()
            self._in_flight.clear()
            self._callback_queued = False  # a backward that raised never ran its queued callback
            self.flag.zero_()
            if self.transport is not None:
                self.transport.reset()
