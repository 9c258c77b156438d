"""Loss scaling for fp16 parameters: a static scale, or DeepSpeed's dynamic policy."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LossScalePolicy", "LossScaler"]


@dataclass(frozen=True)
class LossScalePolicy:
    """How the fp16 loss scale moves. ``dynamic=False`` keeps ``init_scale`` for ever.

    Defaults are DeepSpeed's: start at 2**16; after ``hysteresis`` overflowing steps halve the
    scale (never below ``min_scale``) and
    keep halving at each overflow; after ``window`` clean steps in a row double it.
    """

    init_scale: float = 2.0**16
    dynamic: bool = True
    window: int = 1000
    hysteresis: int = 2
    min_scale: float = 1.0


class LossScaler:
    """The current scale and the counters that move it; ``update`` after every step."""

    def __init__(self, policy: LossScalePolicy):
        self.policy = policy
        self.scale = policy.init_scale
        self._clean_steps = 0
        self._hysteresis_left = policy.hysteresis

    def update(self, overflow: bool) -> None:
        p = self.policy
        if not p.dynamic:
            return
        if overflow:
            self._clean_steps = 0
            if self._hysteresis_left <= 1:
                # As DeepSpeed: once hysteresis is spent, every overflow halves until a clean window.
                self.scale = max(self.scale / 2, p.min_scale)
            else:
                self._hysteresis_left -= 1
            return
        self._clean_steps += 1
        if self._clean_steps % p.window == 0:
            self.scale *= 2
            self._hysteresis_left = p.hysteresis

    def state_dict(self) -> dict:
        return {"scale": self.scale, "clean_steps": self._clean_steps, "hysteresis_left": self._hysteresis_left}

    def load_state_dict(self, state: dict) -> None:
        self.scale = state["scale"]
        self._clean_steps = state["clean_steps"]
        self._hysteresis_left = state["hysteresis_left"]
