"""The two collectives ZeRO-2 needs, under their current names on every supported torch.

torch 2.13 renamed ``reduce_scatter_tensor`` / ``all_gather_into_tensor`` to ``*_single`` and
deprecated the old names; torch 2.11 has only the old ones.
"""

import torch.distributed as dist

__all__ = ["reduce_scatter", "all_gather"]

reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
