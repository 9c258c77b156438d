"""Construction-time checks: bad input fails with a clear error, never a hang or wrong numbers."""

from __future__ import annotations

import hashlib

import torch
import torch.distributed as dist

from tritonzero.collectives import all_gather

__all__ = ["SUPPORTED_DTYPES", "check_params", "optimizer_group_of", "check_same_on_all_ranks"]

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_params(params: list[torch.nn.Parameter]) -> torch.device:
    """The device all trainable ``params`` share; raises for mixed devices or unsupported dtypes."""
    if not params:
        raise ValueError("tritonzero: the model has no parameter that requires grad")
    devices = {p.device for p in params}
    if len(devices) > 1:
        raise ValueError(f"tritonzero: parameters are on different devices {sorted(map(str, devices))}; put the model on one device")
    bad = sorted({str(p.dtype) for p in params if p.dtype not in SUPPORTED_DTYPES})
    if bad:
        raise TypeError(f"tritonzero: parameters of dtype {bad} are not supported; use float32, float16 or bfloat16")
    return devices.pop()


def optimizer_group_of(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter]) -> list[int]:
    """Index of the optimizer param group of each of ``params``.

    Raises when the optimizer holds a tensor that is not a trainable parameter of the model, or
    misses one: ZeRO owns every trainable parameter's gradient, so the two sets must match.
    """
    group_of: dict[int, int] = {}
    for gi, group in enumerate(optimizer.param_groups):
        for p in group["params"]:
            if id(p) in group_of:
                raise ValueError("tritonzero: a parameter appears twice in the optimizer's param groups")
            group_of[id(p)] = gi
    model_ids = {id(p) for p in params}
    foreign = [k for k in group_of if k not in model_ids]
    if foreign:
        raise ValueError(
            f"tritonzero: the optimizer holds {len(foreign)} tensor(s) that are not trainable parameters of the "
            "model; build it over model.parameters()"
        )
    missing = [i for i, p in enumerate(params) if id(p) not in group_of]
    if missing:
        raise ValueError(
            f"tritonzero: {len(missing)} trainable parameter(s) of the model are not in the optimizer; "
            "add them or set requires_grad=False"
        )
    return [group_of[id(p)] for p in params]


def check_same_on_all_ranks(description: str, group: dist.ProcessGroup | None, device: torch.device) -> None:
    """Raise on every rank unless ``description`` (of the bucket layout) is the same on all ranks.

    Different parameter shapes would otherwise give each rank a different bucket layout, and the
    collectives would hang or mix unrelated gradients.
    """
    if group is None or dist.get_world_size(group) == 1:
        return
    digest = int.from_bytes(hashlib.sha256(description.encode()).digest()[:8], "little", signed=True)
    mine = torch.tensor([digest], dtype=torch.int64, device=device)
    every = torch.empty(dist.get_world_size(group), dtype=torch.int64, device=device)
    all_gather(every, mine, group).wait()
    every = every.tolist()
    if len(set(every)) > 1:
        odd = [r for r, d in enumerate(every) if d != every[0]]
        raise RuntimeError(
            "tritonzero: the model's parameters (shapes, dtypes, param groups), bucket_size or keep_grads_until_step "
            "differ across ranks; "
            f"ranks {odd} disagree with rank 0"
        )
