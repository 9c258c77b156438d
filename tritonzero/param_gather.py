"""After each part of the step: all-gather the updated parameters, optionally behind the next forward.

The buckets are split into ``chunks`` (forward order, about equal sizes). The optimizer steps
one chunk's fp32 masters at a time; ``start(i)`` then copies chunk i's masters into its
parameter shards and all-gathers its buckets in one coalesced call on the gather stream, while
the compute stream steps chunk i + 1::

    compute  [step c0][ev0][step c1][ev1][step c2][ev2]..........[fwd layer 0]..[fwd layer 1]..
                         \\ wait      \\ wait      \\ wait              ^ wait c0      ^ wait c1
    gather   ............[copy+AG c0].[copy+AG c1].[copy+AG c2]................................

Only the last chunk's all-gather is left after the step. With ``overlap`` a forward pre-hook on
each module that owns parameters makes the compute stream wait for its own chunks alone, so the
gathers still running hide behind earlier layers' forward; without it the optimizer waits for
all of them at the end of ``step`` (``wait_all``). Without CUDA the all-gathers run async on the
process group and the waits block the host.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist

from tritonzero.bucket import Bucket
from tritonzero.collectives import WorkList, all_gather_coalesced
from tritonzero.timeline import Timeline, marker
from tritonzero.weak_hooks import remove_with, weak_call

__all__ = ["ParamGather", "split_chunks"]


class ParamGather:
    """Issues and tracks the parameter all-gathers of one set of buckets, one chunk at a time."""

    def __init__(
        self,
        model: torch.nn.Module,
        buckets: list[Bucket],
        group: dist.ProcessGroup | None,
        overlap: bool,
        timeline: Timeline | None,
        chunks: int = 1,
    ):
        self.group = group
        self.overlap = overlap
        self.timeline = timeline
        # Buckets are in backward order; forward needs the last one first.
        self.chunks = split_chunks(list(reversed(buckets)), chunks)
        device = buckets[0].param_buffer.device
        self._cuda = device.type == "cuda"
        self._stream = torch.cuda.Stream(device, priority=-1) if self._cuda else None
        self._events = [torch.cuda.Event() for _ in self.chunks] if self._cuda else []
        self._works: dict[int, dist.Work | WorkList] = {}
        self._pending: set[int] = set()  # chunks started and not waited for
        if overlap:
            # Weak (weak_hooks.py): a model kept after its optimizer is dropped must not keep the
            # buckets and their fp32 masters alive.
            chunk_of = {id(p): i for i, chunk in enumerate(self.chunks) for b in chunk for p in b.params}
            hooks = []
            for module in model.modules():
                owned = {chunk_of[id(p)] for p in module._parameters.values() if p is not None and id(p) in chunk_of}
                if owned:
                    hooks.append(module.register_forward_pre_hook(weak_call(self._before_forward, tuple(sorted(owned)))))
            remove_with(self, hooks)

    def start(self, i: int) -> None:
        """Issue chunk ``i``'s copy-in and all-gather (call on the stream that updated its masters)."""
        mark = marker(self.timeline)
        chunk = self.chunks[i]
        if self._cuda:
            # HAZARD (read-after-write): the copy-in reads master weights the optimizer step on the
            # compute stream is still writing.
            self._stream.wait_stream(torch.cuda.current_stream(self._stream.device_index))
        with torch.cuda.stream(self._stream) if self._cuda else contextlib.nullcontext():
            mark("comm", f"all-gather c{i} start")
            copies = [b for b in chunk if b.master is not b.param_shard]
            if copies:
                torch._foreach_copy_([b.param_shard for b in copies], [b.master for b in copies])
            gathered = [b for b in chunk if b.layout.world_size > 1]
            if self.group is not None and gathered:
                work = all_gather_coalesced([b.param_buffer for b in gathered], [b.param_shard for b in gathered], self.group)
                if self._cuda:
                    work.wait()  # the gather stream waits for NCCL's, not the host
                else:
                    self._works[i] = work
            if self._cuda:
                self._events[i].record(self._stream)
            mark("comm", f"all-gather c{i} end")
        self._pending.add(i)

    def start_all(self) -> None:
        """Issue every chunk (after masters change outside ``step``: a checkpoint load)."""
        for i in range(len(self.chunks)):
            self.start(i)

    def wait_all(self) -> None:
        """The current stream (CUDA) or the host (CPU) waits for every chunk's parameters."""
        for i in range(len(self.chunks)):
            self._wait_chunk(i)

    def _before_forward(self, chunks: tuple[int, ...], module: torch.nn.Module, args) -> None:
        for i in chunks:
            self._wait_chunk(i)

    def _wait_chunk(self, i: int) -> None:
        if i not in self._pending:
            return
        self._pending.discard(i)
        if self._cuda:
            # HAZARD (read-before-write): forward must not read parameters the all-gather is
            # still writing; and the next step must not rewrite a shard it is still reading.
            torch.cuda.current_stream(self._stream.device_index).wait_event(self._events[i])
        elif i in self._works:
            self._works.pop(i).wait()

def split_chunks(buckets: list[Bucket], n: int) -> list[list[Bucket]]:
    """``buckets`` in order, cut into at most ``n`` runs of about equal shard elements."""
    total = sum(b.layout.shard_numel for b in buckets)
    chunks, current, filled = [], [], 0
    for b in buckets:
        current.append(b)
        filled += b.layout.shard_numel
        if len(chunks) < n - 1 and filled * n >= total * (len(chunks) + 1):
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks
