"""tritonzero: ZeRO-2 gradient sync with rank-contiguous buckets and a fused Triton prep kernel."""

from tritonzero import checkpoint
from tritonzero.loss_scale import LossScalePolicy
from tritonzero.optimizer import ZeroOptimizer

__all__ = ["ZeroOptimizer", "LossScalePolicy", "checkpoint"]
