"""One gradient bucket at run time: its buffers, its readiness count and its comm-stream pipeline.

On CUDA, per bucket and per step (``ready`` and ``done`` are the bucket's two events)::

    compute  ..bwd p5..bwd p4..bwd p3..[ready]..bwd p2 ...............................
                                          \\ wait                       (no edge back)
    comm     .............................[prep kernel][RS issue][wait NCCL][done]....
    nccl     ..........................................[reduce-scatter]..............
                                                                          \\ wait
    step()   ......................................................................[done]..

A bucket whose one gradient is its own send buffer may skip the prep kernel on NCCL: the
reduce-scatter reads the gradient and averages as it reads (``issue``). With the copy-engine
transport (copy_engine.py) copies on the comm stream take the reduce-scatter's place, and most
buckets skip prep: the copies read the gradients. The comm stream waits on ``ready`` alone;
the compute stream waits on ``done`` only in ``finish_grad_sync`` (before the step) or when
too many buckets are in flight (back-pressure).
``mark_ready`` runs on backward's thread; ``issue`` runs on the comm thread (launcher.py), whose
current stream is the comm stream. Without CUDA there are no streams: the prep kernel runs in
the comm thread (Triton interpreter) and the reduce-scatter runs async until ``wait``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

import torch
import torch.distributed as dist

from tritonzero.collectives import reduce_scatter
from tritonzero.kernels import BucketPrepPlan, SourceTable, prep_bucket
from tritonzero.layout import BucketLayout
from tritonzero.timeline import Timeline, marker

if TYPE_CHECKING:
    from tritonzero.copy_engine import CopyEngineReduce

__all__ = ["Bucket"]


class Bucket:
    """Buffers and per-step state of one :class:`BucketLayout` on one rank.

    The bucket's parameters become views of ``param_buffer`` (so the all-gather writes them in
    place); ``grad_shard`` receives this rank's reduced slice, from ``issue`` until ``reset``
    (allocated per step, so it takes no memory while forward's activations are alive; with the
    copy-engine transport's ``keep_grads`` it may be a slice of the gradient itself);
    ``master`` is the fp32 slice the wrapped optimizer steps (for fp32 parameters, the
    parameter slice itself).
    """

    def __init__(
        self,
        index: int,
        layout: BucketLayout,
        params: list[torch.nn.Parameter],
        rank: int,
        reduce_dtype: torch.dtype,
        device: torch.device,
    ):
        self.index = index
        self.layout = layout
        self.params = [params[i] for i in layout.param_indices]
        self.reduce_dtype = reduce_dtype
        self.param_buffer = torch.zeros(layout.padded_numel, dtype=layout.dtype, device=device)
        with torch.no_grad():
            for p, off, n in zip(self.params, layout.offsets, layout.numels):
                view = self.param_buffer[off : off + n]
                view.copy_(p.detach().reshape(-1))
                p.data = view.view_as(p)
        lo, hi = layout.shard_range(rank)
        self.param_shard = self.param_buffer[lo:hi]
        self.master = self.param_shard if layout.dtype == torch.float32 else self.param_shard.float()
        self.plan = BucketPrepPlan.build(list(layout.numels), list(layout.offsets), layout.padded_numel, device)
        self._sources: SourceTable | None = None
        self._cuda = device.type == "cuda"
        self._device_index = device.index
        if self._cuda:
            self.ready = torch.cuda.Event()
            self.done = torch.cuda.Event()
        self._work: tuple[dist.Work, torch.Tensor] | None = None
        self._held: list[torch.Tensor] = []
        self.issued = threading.Event()  # set by the comm thread once ``done`` is recorded
        self.issued.set()
        self.reset()

    def reset(self) -> None:
        """Forget this step's gradients and reduced shard; the next backward fills the bucket again.

        On CUDA the caller has ordered the current stream after ``done`` (``wait``).
        """
        self.grads: list[torch.Tensor | None] = [None] * len(self.params)
        self.pending = len(self.params)
        self.launched = False
        self.grad_shard: torch.Tensor | None = None

    def add_grad(self, slot: int, grad: torch.Tensor) -> bool:
        """Take one parameter's gradient; True when the bucket is complete."""
        if self.launched or self.grads[slot] is not None:
            raise RuntimeError(
                "tritonzero: a parameter received a second gradient before step()/zero_grad(); "
                "its bucket was already reduced. Call step() or zero_grad() between backward passes."
            )
        self.grads[slot] = grad if grad.is_contiguous() else grad.contiguous()
        self.pending -= 1
        return self.pending == 0

    def mark_ready(self, timeline: Timeline | None = None) -> None:
        """On backward's thread: every gradient is in; record ``ready`` on the compute stream."""
        self.launched = True
        self.issued.clear()
        if self._cuda:
            # HAZARD (read-after-write): the prep kernel (or the reduce-scatter, for a gradient
            # reduced without prep) reads gradients that backward kernels on the compute stream
            # are still writing; ``ready`` is recorded after them.
            self.ready.record(self._current_stream())
            marker(timeline)("compute", f"grads ready b{self.index}")

    def issue(
        self,
        factor: float,
        flag: torch.Tensor,
        group: dist.ProcessGroup | None,
        timeline: Timeline | None = None,
        divisor: torch.Tensor | None = None,
        unprepped: bool = False,
        transport: CopyEngineReduce | None = None,
    ) -> None:
        """On the comm thread (current stream: comm): prep the bucket (gradients times ``factor``,
        divided by the device scalar ``divisor`` if given; missing gradients read as zeros) and
        start its reduce-scatter. With one rank prep writes the shard itself.

        A gradient that fills the bucket exactly is its own send buffer (``_whole_grad``).
        ``unprepped`` (``GradSync``; needs ``divisor`` None): no prep kernel. On NCCL a gradient
        that is its own send buffer is sent as it is (``factor`` is 1 / world size, exact in
        every dtype): the reduce-scatter multiplies it by ``factor`` as it reads it; its
        non-finite values then reach the overflow flag through the reduced shard, which
        ``MasterGrads`` checks before the step: a sum with a non-finite term is not finite. With
        ``transport`` (copy_engine.py: copies instead of the collective) the copies read the
        gradients themselves, and ``MasterGrads`` multiplies the sum by ``factor`` in the step."""
        if self._cuda:
            stream = self._current_stream()
            stream.wait_event(self.ready)
        self._reduce(factor, flag, group, marker(timeline), divisor, unprepped, transport)
        if self._cuda:
            # HAZARD (use-after-free): backward has dropped these gradients; if their memory
            # served a compute-stream allocation before the prep kernel (or a copy, or the
            # reduce-scatter of a gradient that is its own send buffer) read it, that would read
            # another tensor. Held until ``poll`` sees ``done`` or ``wait`` orders the compute
            # stream after it (one event query instead of a record_stream per gradient).
            self._held = [g for g in self.grads if g is not None]
            self.done.record(stream)
        self.grads = [None] * len(self.params)
        self.issued.set()

    def _reduce(
        self,
        factor: float,
        flag: torch.Tensor,
        group: dist.ProcessGroup | None,
        mark: Callable[[str, str], None],
        divisor: torch.Tensor | None,
        unprepped: bool,
        transport: CopyEngineReduce | None,
    ) -> None:
        """``issue``'s work on the comm stream, after the wait for ``ready``."""
        solo = self.layout.world_size == 1
        # HAZARD (reuse): on CUDA new buffers come from the comm stream's pool, after the wait on
        # ``ready`` (a gradient that is the send buffer is held by ``issue`` instead). A new send
        # buffer is freed there after ``work.wait``, so the next bucket gets it only after this
        # collective has read it. Last step's shard, read by that step on the compute stream,
        # went back to this pool at ``reset``; any reuse comes after this wait on an event
        # recorded on the compute stream after that step.
        whole = None if solo else self._whole_grad()
        if transport is not None and unprepped:
            send = None  # the copies read the gradients; ``push_grads`` sets the shard
        else:
            self.grad_shard = self.new_shard()
            if solo:
                send = self.grad_shard
            elif whole is not None:
                # No bucket-sized buffer when the gradient is one: with a 1e6 bucket size a large
                # weight's bucket is 32 MiB, allocated at backward's peak.
                send = whole
            else:
                send = torch.empty_like(self.param_buffer, dtype=self.reduce_dtype)
        as_is = unprepped and whole is not None
        if send is not None and not as_is:
            mark("comm", f"prep b{self.index} start")
            self._sources = self.plan.source_table(self.grads, previous=self._sources)
            prep_bucket(self.plan, self._sources, send, flag, factor, self.layout.dtype, divisor)
            mark("comm", f"prep b{self.index} end")
        if solo:
            return
        mark("comm", f"reduce-scatter b{self.index} start")
        if transport is None:
            work = reduce_scatter(self.grad_shard, send, group, average=as_is)
            if not self._cuda:
                self._work = (work, send)  # the send buffer must outlive the async collective
                return
            # The comm stream (not the host) waits for NCCL's stream, so ``done`` marks the shard
            # as written and ``send`` as no longer read.
            work.wait()
        elif send is None:
            transport.push_grads(self)  # copies on this (the comm) stream: ``done`` covers them
        else:
            transport.push(self, send)
        mark("comm", f"reduce-scatter b{self.index} end")

    def new_shard(self) -> torch.Tensor:
        """An uninitialised reduced shard, from the current (comm) stream's pool (see ``_reduce``)."""
        return torch.empty(self.layout.shard_numel, dtype=self.reduce_dtype, device=self.param_buffer.device)

    def _whole_grad(self) -> torch.Tensor | None:
        """The bucket's one gradient, flat, when it fills the bucket exactly: the send buffer
        (prep, if it runs, scales it in place: each element is read before it is written, by the
        same thread). The shard is not a slice of it: that would hold the whole gradient until
        the step, (world size - 1) x the shard more than ZeRO-2 keeps."""
        grad = self.grads[0] if self.fits_exactly else None
        return None if grad is None else grad.view(-1)

    @property
    def fits_exactly(self) -> bool:
        """One parameter, in the reduce dtype, filling the bucket with no padding: its gradient
        (autograd gives a gradient its parameter's dtype) is the send buffer when it has one."""
        return len(self.params) == 1 and self.layout.numels[0] == self.layout.padded_numel and self.reduce_dtype == self.layout.dtype

    def _current_stream(self) -> torch.cuda.Stream:
        # With the device index given, torch skips re-deriving the current device (environment
        # reads included): about 10 us less host time per call, several calls per bucket.
        return torch.cuda.current_stream(self._device_index)

    def poll(self) -> bool:
        """True once the reduce-scatter has finished (no waiting); then frees the held gradients."""
        if not self.issued.is_set():
            return False
        if self._cuda:
            if not self.done.query():
                return False
            self._held = []
        elif self._work is not None:
            if not self._work[0].is_completed():
                return False
            self.wait()
        return True

    def wait(self) -> None:
        """Make the current stream (CUDA, no host sync) or the host (CPU) wait for the reduce-scatter.

        The bucket must have been issued (``CommLauncher.drain`` or ``wait_for``) unless it
        was never launched this step.
        """
        if self._cuda:
            self._current_stream().wait_event(self.done)
            self._held = []  # compute-stream reuse of their memory is now ordered after prep
        elif self._work is not None:
            self._work[0].wait()
            self._work = None
