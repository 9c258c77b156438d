"""Loss scaling for fp16 parameters: a static scale, or DeepSpeed's dynamic policy, on the device.

The scale and its counters are device tensors updated by tensor ops, so a step never reads them
back to the host; ``LossScaler.value`` does (one sync) when asked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LossScalePolicy", "LossScaler"]


@dataclass(frozen=True)
class LossScalePolicy:
    """How the fp16 loss scale moves. ``dynamic=False`` keeps ``init_scale`` for ever.

    Defaults are DeepSpeed's: start at 2**16; the first ``hysteresis - 1`` overflowing steps
    keep the scale, then every overflow halves it (never below ``min_scale``) until ``window``
    clean steps in a row double it and restore the hysteresis.
    """

    init_scale: float = 2.0**16
    dynamic: bool = True
    window: int = 1000
    hysteresis: int = 2
    min_scale: float = 1.0


class LossScaler:
    """The current scale (``scale``, a 0-dim fp32 device tensor) and the counters that move it."""

    def __init__(self, policy: LossScalePolicy, device: torch.device):
        self.policy = policy
        self.scale = torch.tensor(policy.init_scale, dtype=torch.float32, device=device)
        self._clean_steps = torch.zeros((), dtype=torch.int64, device=device)
        self._hysteresis_left = torch.full((), policy.hysteresis, dtype=torch.int64, device=device)

    @property
    def value(self) -> float:
        return float(self.scale)

    def update(self, found_inf: torch.Tensor) -> None:
        """Move the scale after a step; ``found_inf`` (device, > 0 on overflow) is never read on the host."""
        p = self.policy
        if not p.dynamic:
            return
        overflow = found_inf.reshape(()) > 0
        halve = overflow & (self._hysteresis_left <= 1)
        self.scale.copy_(torch.where(halve, (self.scale / 2).clamp(min=p.min_scale), self.scale))
        self._hysteresis_left.sub_((overflow & ~halve).long())
        self._clean_steps.copy_(torch.where(overflow, 0, self._clean_steps + 1))
        grow = ~overflow & (self._clean_steps % p.window == 0)
        self.scale.copy_(torch.where(grow, self.scale * 2, self.scale))
        self._hysteresis_left.copy_(torch.where(grow, p.hysteresis, self._hysteresis_left))

    def state_dict(self) -> dict:
        return {"scale": self.value, "clean_steps": int(self._clean_steps), "hysteresis_left": int(self._hysteresis_left)}

    def load_state_dict(self, state: dict) -> None:
        self.scale.fill_(state["scale"])
        self._clean_steps.fill_(state["clean_steps"])
        self._hysteresis_left.fill_(state["hysteresis_left"])
