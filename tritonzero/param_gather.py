"""After the step: all-gather every bucket's updated parameters, optionally behind the next forward.

``start`` (end of ``step``) copies each fp32 master shard into the bucket's parameter shard and
all-gathers the bucket in place, bucket by bucket in forward order, on a gather stream::

    compute  ..[optimizer step][ev]......[fwd layer 0]..[fwd layer 1]..........
                                 \\ wait      ^ wait b7       ^ wait b6
    gather   .....................[copy b7][AG b7][copy b6][AG b6]...........

With ``overlap`` a forward pre-hook on each module that owns parameters makes the compute stream
wait for its buckets alone, so the gathers of later layers hide behind earlier layers' forward.
Without it ``start`` waits for them all at once (as a synchronous all-gather would).
Without CUDA the all-gathers run async on the process group and the waits block the host.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from tritonzero.bucket import Bucket
from tritonzero.collectives import all_gather
from tritonzero.timeline import Timeline, marker

__all__ = ["ParamGather"]


class ParamGather:
    """Issues and tracks the parameter all-gathers of one set of buckets."""

    def __init__(
        self,
        model: torch.nn.Module,
        buckets: list[Bucket],
        group: dist.ProcessGroup | None,
        overlap: bool,
        timeline: Timeline | None,
    ):
        self.buckets = buckets
        self.group = group
        self.overlap = overlap
        self.timeline = timeline
        device = buckets[0].param_buffer.device
        self._cuda = device.type == "cuda"
        self._stream = torch.cuda.Stream(device, priority=-1) if self._cuda else None
        self._events = {id(b): torch.cuda.Event() for b in buckets} if self._cuda else {}
        self._works: dict[int, dist.Work] = {}
        self._pending: set[int] = set()
        self._hooks = []
        if overlap:
            bucket_of = {id(p): b for b in buckets for p in b.params}
            for module in model.modules():
                owned = {id(bucket_of[id(p)]): bucket_of[id(p)] for p in module._parameters.values() if p is not None and id(p) in bucket_of}
                if owned:
                    hook = module.register_forward_pre_hook(lambda mod, args, owned=tuple(owned.values()): self.wait(owned))
                    self._hooks.append(hook)

    def start(self) -> None:
        """Issue every bucket's copy-in and all-gather (call on the stream that updated the masters)."""
        mark = marker(self.timeline)
        ordered = list(reversed(self.buckets))  # buckets are in backward order; forward needs the last first
        if self._cuda:
            # HAZARD (read-after-write): the copy-in reads master weights the optimizer step on the
            # compute stream is still writing.
            self._stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._stream) if self._cuda else contextlib.nullcontext():
            for b in ordered:
                mark("comm", f"all-gather b{b.index} start")
                if b.master is not b.param_shard:
                    b.param_shard.copy_(b.master)
                if self.group is not None and b.layout.world_size > 1:
                    work = all_gather(b.param_buffer, b.param_shard, self.group)
                    if self._cuda:
                        work.wait()  # the gather stream waits for NCCL's, not the host
                    else:
                        self._works[id(b)] = work
                if self._cuda:
                    self._events[id(b)].record(self._stream)
                mark("comm", f"all-gather b{b.index} end")
                self._pending.add(id(b))
        if not self.overlap:
            self.wait_all()

    def wait(self, buckets) -> None:
        """The current stream (CUDA) or the host (CPU) waits for these buckets' parameters."""
        for b in buckets:
            if id(b) not in self._pending:
                continue
            self._pending.discard(id(b))
            if self._cuda:
                # HAZARD (read-before-write): forward must not read parameters the all-gather is
                # still writing; and the next step must not rewrite a shard it is still reading.
                torch.cuda.current_stream(self._stream.device_index).wait_event(self._events[id(b)])
            elif id(b) in self._works:
                self._works.pop(id(b)).wait()

    def wait_all(self) -> None:
        self.wait(self.buckets)

