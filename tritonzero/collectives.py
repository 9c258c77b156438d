"""The collectives ZeRO-2 needs, called on the process group object itself.

``dist.reduce_scatter_tensor`` and friends wrap the process group's methods in Python layers
(logging decorator, argument checks, renames across torch versions) that cost about 50 µs a
call on the host; with hundreds of buckets a step that is time backward spends launching.
Each function returns the async ``Work`` (``all_gather_coalesced`` on CPU: a ``WorkList`` of
them); call ``.wait()`` on it.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

__all__ = ["reduce_scatter", "all_gather", "all_gather_coalesced", "WorkList"]

_SUM = dist.ReduceScatterOptions()
_SUM.reduceOp = dist.ReduceOp.SUM
_AVG = dist.ReduceScatterOptions()
_AVG.reduceOp = dist.ReduceOp.AVG


def reduce_scatter(output: torch.Tensor, input: torch.Tensor, group: dist.ProcessGroup, average: bool = False) -> dist.Work:
    """Sum ``input`` (``world_size * output.numel()`` elements) over ranks; rank r gets slice r.

    ``average`` (NCCL only): the mean instead, each rank's input multiplied by 1 / world size
    inside the collective, in the input's dtype, before the sum (NCCL's PreMulSum), so no kernel
    has to scale the input first. bf16 goes through ``ReduceOp.AVG`` (NCCL picks the factor):
    torch hands NCCL a bf16 PreMulSum factor as an fp32 value that NCCL reads as bf16, which is
    zero for 0.5 (measured on torch 2.11: the reduced shards came back as zeros).
    """
    if not average:
        return group._reduce_scatter_base(output, input, _SUM)
    options = _AVG if input.dtype == torch.bfloat16 else _premul_sum(1.0 / group.size())
    return group._reduce_scatter_base(output, input, options)


@functools.cache
def _premul_sum(factor: float) -> dist.ReduceScatterOptions:
    options = dist.ReduceScatterOptions()
    options.reduceOp = dist._make_nccl_premul_sum(factor)
    return options


def all_gather(output: torch.Tensor, input: torch.Tensor, group: dist.ProcessGroup) -> dist.Work:
    """Concatenate every rank's ``input`` into ``output``; ``input`` may be this rank's slice of it."""
    return group._allgather_base(output, input)


def all_gather_coalesced(outputs: list[torch.Tensor], inputs: list[torch.Tensor], group: dist.ProcessGroup) -> dist.Work | WorkList:
    """``all_gather`` of every pair: on CUDA in one call (one NCCL group: one launch, one ``Work``).

    On CPU (gloo) each pair gets its own ``all_gather``. gloo's coalesced all-gather reads a call's
    inputs as the first one's dtype (a chunk holds one bucket per dtype), and two of them in
    flight at once corrupt the heap (``ParamGather`` leaves one in flight per chunk). Both
    reproduced with torch 2.13 and gloo alone (RESULTS.md, section 5).
    """
    if outputs[0].device.type == "cpu":
        return WorkList([all_gather(out, inp, group) for out, inp in zip(outputs, inputs)])
    return group.allgather_into_tensor_coalesced(outputs, inputs)


class WorkList:
    """Several ``Work``s waited for as one.

    >>> work = WorkList([all_gather(out, inp, group) for out, inp in pairs])
    >>> work.wait()  # every one of them is done
    """

    def __init__(self, works: list[dist.Work]):
        self.works = works

    def wait(self) -> bool:
        for work in self.works:
            work.wait()
        return True
